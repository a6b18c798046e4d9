"""`pip install .` and `pip install -e .` into fresh virtual environments both import all three packages,
and the training application beside them with its `lazytensor` command."""
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _source_packages():
    """Every package in the source tree, by the name it installs under."""
    names = []
    for top, prefix in (("lazytensor", "lazytensor"), ("runtime", "lazytensor.runtime"),
                        ("kernels", "lazytensor.kernels"), ("lazytensor_train", "lazytensor_train")):
        for init in sorted((REPO / top).rglob("__init__.py")):
            rel = init.parent.relative_to(REPO / top).parts
            names.append(".".join((prefix,) + rel))
    return names


CHECK = textwrap.dedent("""
    import importlib, json, sys
    import lazytensor, lazytensor.runtime, lazytensor.kernels
    import lazytensor as lt
    for name in sys.argv[1:]:
        importlib.import_module(name)  # every package of the source tree is installed
    top_level = {}
    for name in ("runtime", "kernels"):
        try:
            importlib.import_module(name)
            top_level[name] = True
        except ModuleNotFoundError:
            top_level[name] = False
    from lazytensor.kernels.gpu import CUDA, METAL, catalog
    from lazytensor.kernels.cuda.tiled import tiled_matmul
    device_text = len(catalog.source(CUDA)) + len(catalog.source(METAL))  # the preludes ship as data
    device_text += len(tiled_matmul((1,), 128, 64, 128, (0,), (0,), "float32").source(CUDA))
    print(json.dumps({"lazytensor": lazytensor.__file__, "runtime": lazytensor.runtime.__file__,
                      "kernels": lazytensor.kernels.__file__, "top_level": top_level,
                      "value": lt.ones(3).sum().item(), "device_text": device_text}))
""")


def _copy_sources(dst):
    ignore = shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".hypothesis", ".venv",
                                    ".pytest_cache", ".whl")
    shutil.copytree(REPO, dst, ignore=ignore)
    return dst


def _fresh_venv(path):
    """A venv with no packages of its own; the test environment's site-packages supply the dependencies."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    own_site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
    # A plain path entry (not a site dir), so the test environment's own install of lazytensor is not seen.
    Path(own_site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python, Path(own_site)


def _install_and_check(tmp_path, editable):
    src = _copy_sources(tmp_path / "src")
    python, site = _fresh_venv(tmp_path / "venv")
    cmd = [str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    cmd += ["-e", str(src)] if editable else [str(src)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=tmp_path)
    out = subprocess.run([str(python), "-c", CHECK, *_source_packages()], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    import json
    return src, site, json.loads(out.stdout)


@pytest.mark.slow
def test_pip_install_into_a_fresh_venv_imports_all_three_packages(tmp_path):
    src, site, info = _install_and_check(tmp_path, editable=False)
    for name in ("lazytensor", "runtime", "kernels"):
        assert Path(info[name]).is_relative_to(site), info
    assert Path(info["runtime"]).parent == site / "lazytensor" / "runtime"
    assert info["top_level"] == {"runtime": False, "kernels": False}
    assert info["value"] == 3.0
    assert info["device_text"] > 100_000


@pytest.mark.slow
def test_pip_install_provides_the_lazytensor_command_from_the_training_app(tmp_path):
    _install_and_check(tmp_path, editable=False)
    command = tmp_path / "venv" / ("Scripts/lazytensor.exe" if os.name == "nt" else "bin/lazytensor")
    out = subprocess.run([str(command), "train", "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "usage: lazytensor train" in out.stdout


@pytest.mark.slow
def test_editable_install_maps_runtime_and_kernels_into_lazytensor(tmp_path):
    src, site, info = _install_and_check(tmp_path, editable=True)
    assert Path(info["lazytensor"]) == src / "lazytensor" / "__init__.py"
    assert Path(info["runtime"]) == src / "runtime" / "__init__.py"
    assert Path(info["kernels"]) == src / "kernels" / "__init__.py"
    assert info["top_level"] == {"runtime": False, "kernels": False}
    assert info["value"] == 3.0


USE_NUMBA_KERNELS = "import lazytensor as lt; x = lt.arange(300000, dtype=lt.float32); print((x * 2).sum().item())"


def _recorded_files(site):
    record = next(site.glob("lazytensor-*.dist-info")) / "RECORD"
    return {site / line.split(",")[0] for line in record.read_text().splitlines() if line}


@pytest.mark.slow
def test_running_kernels_writes_no_file_into_the_installed_package(tmp_path):
    src = _copy_sources(tmp_path / "src")
    python, site = _fresh_venv(tmp_path / "venv")
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    str(src)], check=True, capture_output=True, text=True, cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "LAZYTENSOR_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    out = subprocess.run([str(python), "-c", USE_NUMBA_KERNELS], capture_output=True, text=True, cwd=tmp_path,
                         env=env)
    assert out.returncode == 0, out.stderr
    on_disk = {p for p in (site / "lazytensor").rglob("*") if p.is_file()}
    assert on_disk - _recorded_files(site) == set()  # pip uninstall removes exactly what it installed
    assert list((tmp_path / "cache" / "lazytensor" / "numba").rglob("*.nbi"))  # numba's cache went here


@pytest.mark.slow
def test_an_editable_install_over_a_used_regular_install_imports_the_source_tree(tmp_path):
    """The README's two commands in order: `pip install .`, run it, then `pip install -e .`."""
    src = _copy_sources(tmp_path / "src")
    python, site = _fresh_venv(tmp_path / "venv")
    pip = [str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    env = {k: v for k, v in os.environ.items() if k != "LAZYTENSOR_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    subprocess.run(pip + [str(src)], check=True, capture_output=True, text=True, cwd=tmp_path)
    used = subprocess.run([str(python), "-c", USE_NUMBA_KERNELS], capture_output=True, text=True, cwd=tmp_path,
                          env=env)
    assert used.returncode == 0, used.stderr
    subprocess.run(pip + ["-e", str(src)], check=True, capture_output=True, text=True, cwd=tmp_path)
    out = subprocess.run([str(python), "-c", CHECK + "\nassert callable(lt.zeros)", *_source_packages()],
                         capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    import json
    assert Path(json.loads(out.stdout.splitlines()[-1])["lazytensor"]) == src / "lazytensor" / "__init__.py"
    assert not (site / "lazytensor").exists()
