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


@pytest.mark.parametrize("name,raw,message", [
    ("LAZYTENSOR_DEVICE", "gpu", "LAZYTENSOR_DEVICE must be one of auto, cpu, cuda, metal, virtual; got 'gpu'"),
    ("LAZYTENSOR_JIT", "maybe", "LAZYTENSOR_JIT must be 1 or 0"),
    ("LAZYTENSOR_NUM_THREADS", "0", "LAZYTENSOR_NUM_THREADS must be a positive integer, got '0'"),
    ("LAZYTENSOR_LOG_RECORDS", "-1", "LAZYTENSOR_LOG_RECORDS must be a non-negative integer"),
    ("LAZYTENSOR_MEMORY_BUDGET", "lots", "LAZYTENSOR_MEMORY_BUDGET: cannot read 'lots' as a number of bytes"),
    ("LAZYTENSOR_VIRTUAL_OFFLOAD", "sometimes", "LAZYTENSOR_VIRTUAL_OFFLOAD must be one of policy, always"),
    ("LAZYTENSOR_MALLOC", "fast", "LAZYTENSOR_MALLOC must be one of tuned, default"),
])
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
    assert lt.kernel_cache_dir() == str(tmp_path / "xdg" / "lazytensor" / "numba")


def test_every_device_checks_its_offload_option_the_same_way():
    with pytest.raises(ValueError, match="virtual offload must be 'policy' or 'always', got 'never'"):
        lt.set_device("virtual", offload="never")
