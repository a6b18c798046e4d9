"""numba's disk cache for the kernels folder: kept under the kernel cache root, and fresh only while no
source file of the folder changed (kernels inline functions from other files)."""
import os

from lazytensor.kernels.cpu import numba_cache, softmax, special32


def _locator(fn):
    return numba_cache.KernelCacheLocator.from_function(fn.py_func, fn.py_func.__code__.co_filename)


def test_a_change_to_any_source_file_of_the_folder_changes_its_stamp(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    before = numba_cache.folder_stamp(str(tmp_path))
    (tmp_path / "sub" / "b.py").write_text("y = 20\n")   # another size
    assert numba_cache.folder_stamp(str(tmp_path)) != before
    after = numba_cache.folder_stamp(str(tmp_path))
    os.utime(tmp_path / "a.py", (1, 1))                   # another time, same size
    assert numba_cache.folder_stamp(str(tmp_path)) != after


def test_files_that_are_not_python_sources_leave_the_stamp_alone(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    before = numba_cache.folder_stamp(str(tmp_path))
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "notes.txt").write_text("not code\n")
    assert numba_cache.folder_stamp(str(tmp_path)) == before


def test_a_kernel_is_stamped_with_every_file_it_may_inline_from():
    rows, exp = _locator(softmax.softmax_rows), _locator(special32.erf_into_float32)
    assert rows.get_source_stamp() == exp.get_source_stamp()
    stamped = {path for path, _, _ in rows.get_source_stamp()}
    assert {os.path.join("cpu", "softmax.py"), os.path.join("cpu", "special32.py")} <= stamped
