"""One table of LAZYTENSOR_* variables: parsed in one place, with errors naming the variable, and the
README's table is that table."""
import re
from pathlib import Path

import pytest

import lazytensor as lt
from lazytensor.runtime import config

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_shows_the_configuration_table():
    assert config.markdown_table() in (ROOT / "README.md").read_text()


def names_in(text):
    return set(re.findall(r"LAZYTENSOR_[A-Z0-9_]+", text))


def test_every_variable_the_code_and_docs_name_is_in_the_table():
    mentioned = set()
    for folder in ("lazytensor", "runtime", "kernels", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md"):
                mentioned |= names_in(path.read_text())
    mentioned |= names_in((ROOT / "README.md").read_text())
    assert mentioned == {v.name for v in config.VARIABLES}


def test_only_the_configuration_module_reads_the_environment_for_our_variables():
    readers = []
    for folder in ("lazytensor", "runtime", "kernels"):
        for path in (ROOT / folder).rglob("*.py"):
            if re.search(r"environ(\.get)?[\[(]\s*[\"']LAZYTENSOR_", path.read_text()):
                readers.append(path.relative_to(ROOT).as_posix())
    assert readers == []  # config.get reads os.environ with the name held in a variable


BAD_VALUES = [
    ("LAZYTENSOR_DEVICE", "gpu", "LAZYTENSOR_DEVICE must be one of auto, cpu, cuda, metal, virtual; got 'gpu'"),
    ("LAZYTENSOR_JIT", "maybe", "LAZYTENSOR_JIT must be 1 or 0"),
    ("LAZYTENSOR_NUM_THREADS", "0", "LAZYTENSOR_NUM_THREADS must be a positive integer, got '0'"),
    ("LAZYTENSOR_LOG_RECORDS", "-1", "LAZYTENSOR_LOG_RECORDS must be a non-negative integer"),
    ("LAZYTENSOR_MEMORY_BUDGET", "lots", "LAZYTENSOR_MEMORY_BUDGET: cannot read 'lots' as a number of bytes"),
    ("LAZYTENSOR_VIRTUAL_OFFLOAD", "sometimes", "LAZYTENSOR_VIRTUAL_OFFLOAD must be one of policy, always"),
    ("LAZYTENSOR_MALLOC", "fast", "LAZYTENSOR_MALLOC must be one of tuned, default"),
    ("LAZYTENSOR_HOST_CACHE", "lots", "LAZYTENSOR_HOST_CACHE: cannot read 'lots' as a number of bytes"),
    ("LAZYTENSOR_FUSE", "x", "LAZYTENSOR_FUSE must be 1 or 0"),
    ("LAZYTENSOR_REPLAY", "2", "LAZYTENSOR_REPLAY must be 1 or 0"),
    ("LAZYTENSOR_CUDA_DRIVER", "opencl", "LAZYTENSOR_CUDA_DRIVER must be one of auto"),
    ("LAZYTENSOR_VIRTUAL_MEMORY", "big", "LAZYTENSOR_VIRTUAL_MEMORY: cannot read 'big'"),
    ("LAZYTENSOR_CUDA_MATMUL", "fast", "LAZYTENSOR_CUDA_MATMUL must be one of tiled, naive"),
    ("LAZYTENSOR_HOST_BLAS", "accelerate", "LAZYTENSOR_HOST_BLAS must be one of auto, numpy, blis, mkl"),
]


@pytest.mark.parametrize("name,raw,message", BAD_VALUES)
def test_a_bad_value_raises_an_error_naming_the_variable(monkeypatch, name, raw, message):
    monkeypatch.setenv(name, raw)
    with pytest.raises(ValueError, match=re.escape(message)):
        config.get(name)


def test_values_are_parsed_and_unset_or_empty_means_the_default(monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_MEMORY_BUDGET", "2MiB")
    monkeypatch.setenv("LAZYTENSOR_FUSE", "off")
    monkeypatch.setenv("LAZYTENSOR_DEVICE", " Virtual ")
    monkeypatch.setenv("LAZYTENSOR_LOG_RECORDS", "")
    assert config.get("LAZYTENSOR_MEMORY_BUDGET") == 2 * 2 ** 20
    assert config.get("LAZYTENSOR_FUSE") is False
    assert config.get("LAZYTENSOR_DEVICE") == "virtual"
    assert config.get("LAZYTENSOR_LOG_RECORDS") == 10000
    monkeypatch.delenv("LAZYTENSOR_MEMORY_BUDGET")
    assert config.get("LAZYTENSOR_MEMORY_BUDGET") is None  # computed by the device: a quarter of free memory


def test_the_kernel_cache_follows_the_variable_when_it_changes(monkeypatch, tmp_path):
    monkeypatch.setenv("LAZYTENSOR_CACHE_DIR", str(tmp_path))
    assert lt.kernel_cache_dir("fused") == str(tmp_path / "fused")
    monkeypatch.delenv("LAZYTENSOR_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert lt.kernel_cache_dir() == str(tmp_path / "xdg" / "lazytensor")  # the folder the variable names
    assert lt.kernel_cache_dir("numba") == str(tmp_path / "xdg" / "lazytensor" / "numba")


def test_every_device_checks_its_offload_option_the_same_way():
    with pytest.raises(ValueError, match="virtual offload must be 'policy' or 'always', got 'never'"):
        lt.set_device("virtual", offload="never")


def _python(*args, **env):
    """`python *args` with the environment plus `env`, its output captured."""
    import os
    import subprocess
    import sys
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


# the variables read when the engine first starts (the host backends, the transfer log, malloc): a bad value
# there used to fail `import lazytensor` itself, with a traceback
@pytest.mark.parametrize("name,raw", [("LAZYTENSOR_JIT", "maybe"), ("LAZYTENSOR_MALLOC", "fast"),
                                      ("LAZYTENSOR_LOG_RECORDS", "-3")])
def test_a_bad_value_of_a_startup_variable_is_one_line_and_status_2_from_the_command(name, raw):
    done = _python("-m", "lazytensor_train", "train", "--steps", "1", "--eval-iters", "1", "--sample-chars", "0",
                   **{name: raw})
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"lazytensor train: error: {name} ") and done.stderr.count("\n") == 1, done.stderr
    assert "step     0" not in done.stdout


@pytest.mark.parametrize("name,raw,message", BAD_VALUES)
def test_the_command_checks_every_variable_before_training(monkeypatch, capsys, name, raw, message):
    from lazytensor_train import cli
    monkeypatch.setenv(name, raw)
    assert cli.main(["train", "--steps", "1", "--eval-iters", "1", "--sample-chars", "0"]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"lazytensor train: error: {captured.err.split('error: ', 1)[1]}"
    assert message in captured.err and captured.err.count("\n") == 1 and "step     0" not in captured.out


def test_importing_lazytensor_succeeds_with_a_bad_value_and_the_first_computation_names_it():
    done = _python("-c", "import lazytensor as lt\nprint('imported')\n"
                             "try:\n    lt.ones(3).sum().item()\nexcept ValueError as e:\n    print(e)",
                             LAZYTENSOR_JIT="maybe")
    assert done.stdout.splitlines() == ["imported", "LAZYTENSOR_JIT must be 1 or 0 (on/off, true/false, yes/no), "
                                                    "got 'maybe'"], done.stderr


def test_an_unwritable_cache_folder_is_one_line_naming_the_variable_and_kernels_still_run(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    code = ("import glob, lazytensor as lt\n"
            "before = set(glob.glob('/tmp/lazytensor-kernels-*'))\n"
            "print(float((lt.arange(100000, dtype=lt.float64) * 2).sum()), lt.kernel_cache_dir())")
    done = _python("-c", code, LAZYTENSOR_CACHE_DIR=str(blocker / "cache"))
    assert done.returncode == 0, done.stderr
    value, folder = done.stdout.split()
    assert float(value) == 9999900000.0
    assert done.stderr.startswith(f"lazytensor: the kernel cache folder {blocker / 'cache'} cannot be written")
    assert "set LAZYTENSOR_CACHE_DIR to a writable folder" in done.stderr and done.stderr.count("\n") == 1
    assert not Path(folder).exists()  # the stand-in folder went with the process


def test_a_bad_value_of_a_variable_read_late_is_named_at_the_first_computation():
    # LAZYTENSOR_LOG_RECORDS is read at the first copy, which a host-only program never makes
    done = _python("-c", "import lazytensor as lt\n"
                         "try:\n    print(lt.ones(3).sum().item())\nexcept ValueError as e:\n    print(e)",
                   LAZYTENSOR_LOG_RECORDS="-3")
    assert done.stdout.splitlines() == ["LAZYTENSOR_LOG_RECORDS must be a non-negative integer, got '-3'"], done.stderr


def test_a_misspelt_variable_is_warned_about_once_at_the_users_line_naming_the_closest_setting(tmp_path):
    script = tmp_path / "user.py"
    script.write_text("import lazytensor as lt\nx = lt.ones(3)\nprint(x.sum().item())\nprint((x * 2).sum().item())\n")
    done = _python(str(script), LAZYTENSOR_DEVISE="virtual", LAZYTENSOR_TEST_ANYTHING="1")
    assert done.returncode == 0 and done.stdout.split() == ["3.0", "6.0"], done.stderr
    warned = [line for line in done.stderr.splitlines() if "UnknownSettingWarning" in line]
    assert len(warned) == 1 and warned[0].startswith(f"{script}:3: UnknownSettingWarning: LAZYTENSOR_DEVISE is not "
                                                     f"a lazytensor setting and is ignored; did you mean "
                                                     f"LAZYTENSOR_DEVICE?")
    assert "LAZYTENSOR_TEST_ANYTHING" not in done.stderr


def test_a_misspelt_train_flag_shows_trains_usage_and_the_closest_flag():
    done = _python("-m", "lazytensor_train", "train", "--stpes", "10")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: lazytensor train ")
    assert done.stderr.strip().endswith("lazytensor train: error: unrecognized arguments: --stpes 10 (did you mean "
                                        "--steps?)")


_COMPILES = """
import numba, lazytensor as lt
print(lt.ones(3).sum().item(), flush=True)
for k in (2, 3):
    fresh = numba.njit(lambda x, k=k: x * k)  # not in any cache: numba compiles it now
    print(fresh(1.0), flush=True)
"""


def test_the_first_compilation_of_a_process_is_said_once_on_stderr():
    done = _python("-c", _COMPILES)
    assert done.returncode == 0 and done.stdout.split() == ["3.0", "2.0", "3.0"], done.stderr
    notes = [line for line in done.stderr.splitlines() if "compiling CPU kernels" in line]
    assert len(notes) == 1 and notes[0].startswith("lazytensor: compiling CPU kernels not in the cache yet")
    assert lt.kernel_cache_dir() in notes[0] or "lazytensor-kernels-" in notes[0]


def test_a_when_compiling_block_says_it_instead_of_the_librarys_notice():
    code = _COMPILES.replace("for k in (2, 3):", "with lt.when_compiling(lambda: print('mine', flush=True)):\n"
                                                  " for k in (2, 3):")
    done = _python("-c", code)
    assert done.returncode == 0 and done.stdout.split() == ["3.0", "mine", "2.0", "3.0"], done.stdout + done.stderr
    assert "compiling CPU kernels" not in done.stderr
