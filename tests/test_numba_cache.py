"""numba's disk cache for the kernels folder: kept under the kernel cache root, and fresh only while no
source file of the folder changed (kernels inline functions from other files)."""
import os

import pytest

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


def _python(code, cache):
    import os
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "LAZYTENSOR_CACHE_DIR": str(cache)})


COMPILES_A_KERNEL = ("import lazytensor as lt\n"
                     "x = lt.arange(100000, dtype=lt.float64)\n"  # past numba's threshold: its fold_sum kernel
                     "with lt.when_compiling(lambda: print('compiling', flush=True)):\n"
                     "    print(float(x.sum()), float(x.sum()))")


def test_when_compiling_tells_once_when_a_kernel_compiles_and_never_when_the_disk_cache_has_it(tmp_path):
    cache = tmp_path / "cache"
    _python("import lazytensor", cache)  # importing makes the cache folders, as it did when this notice broke
    assert (cache / "numba").is_dir()
    first = _python(COMPILES_A_KERNEL, cache)
    assert first.stdout.splitlines() == ["compiling", "4999950000.0 4999950000.0"], first.stderr
    again = _python(COMPILES_A_KERNEL, cache)
    assert again.stdout.splitlines() == ["4999950000.0 4999950000.0"], again.stderr


@pytest.mark.slow
def test_the_training_command_says_it_compiles_on_a_fresh_cache_after_import_made_the_folders(tmp_path):
    cache = tmp_path / "cache"
    _python("import lazytensor", cache)
    code = ("from lazytensor_train import cli\n"
            "cli.main(['train', '--steps', '1', '--eval-iters', '1', '--sample-chars', '0'])")
    first = _python(code, cache)
    assert f"compiling the CPU kernels: once per machine and version (tens of seconds); they are kept in {cache}" \
        in first.stdout, first.stdout + first.stderr
    assert "compiling" not in _python(code, cache).stdout
