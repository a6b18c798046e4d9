"""Device selection, availability reports, the stderr notice, and byte-identical output across devices."""
import os
import subprocess
import sys
import textwrap

import pytest

import lazytensor as lt

PROGRAM = textwrap.dedent("""
    import numpy as np
    import lazytensor as lt
    rng = np.random.default_rng(7)
    x = lt.tensor(rng.normal(size=(256, 256)).astype(np.float32))
    w = lt.tensor(rng.normal(size=(256,)).astype(np.float32))
    y = (x - x.mean(dim=1, keepdim=True)) * w + 0.5           # broadcasts and an axis reduction
    z = lt.maximum(y, 0.0).sum(dim=0) - y.amax(dim=1)          # bit-identical class only
    t = y.permute(1, 0)[::2, 1:].contiguous()
    print(z)
    print(t.sum(dim=1)[:5], t[3, 4], float(t.amin()))
    print(lt.get_device())
""")


def _without_compile_notice(stderr):
    return "".join(line for line in stderr.splitlines(keepends=True)
                   if not line.startswith("lazytensor: compiling CPU kernels"))


def _run(env):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("LAZYTENSOR_", "CUDA_VISIBLE"))}
    full.update(env)
    return subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=full,
                          check=True, timeout=120)


def test_cpu_hidden_cuda_and_virtual_runs_print_the_same_bytes():
    cpu = _run({"LAZYTENSOR_DEVICE": "cpu"})
    hidden = _run({"CUDA_VISIBLE_DEVICES": "", "LAZYTENSOR_DEVICE": "cuda"})
    virtual = _run({"LAZYTENSOR_DEVICE": "virtual"})
    always = _run({"LAZYTENSOR_DEVICE": "virtual", "LAZYTENSOR_VIRTUAL_OFFLOAD": "always"})
    strip = lambda out: out.rsplit("\n", 2)[0]  # the last line names the device
    assert strip(cpu.stdout) == strip(hidden.stdout) == strip(virtual.stdout) == strip(always.stdout)
    assert virtual.stdout.strip().endswith("virtual") and cpu.stdout.strip().endswith("cpu")
    cpu_stderr = _without_compile_notice(cpu.stderr)  # the first run may compile kernels, and says so once
    assert _without_compile_notice(hidden.stderr).count("\n") == 1
    assert "device 'cuda' is not available (hidden: CUDA_VISIBLE_DEVICES" in hidden.stderr
    assert "running on the CPU instead" in hidden.stderr
    assert cpu_stderr == _without_compile_notice(virtual.stderr) == ""


def test_devices_lists_every_backend_with_a_reason():
    entries = {d["name"]: d for d in lt.devices()}
    assert set(entries) == {"cuda", "metal", "virtual", "cpu"}
    assert all(d["reason"] for d in entries.values())
    assert entries["virtual"]["available"] and entries["cpu"]["available"]
    assert "not acceleration" in entries["virtual"]["reason"]
    assert entries["virtual"]["kind"] == "simulated device"


def test_hidden_cuda_is_reported_as_hidden(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    cuda = next(d for d in lt.devices() if d["name"] == "cuda")
    assert not cuda["available"] and "CUDA_VISIBLE_DEVICES" in cuda["reason"]


def test_set_device_switches_and_reports_the_active_one():
    assert lt.set_device("virtual") == "virtual" and lt.get_device() == "virtual"
    assert next(d for d in lt.devices() if d["active"])["name"] == "virtual"
    assert lt.set_device("cpu") == "cpu"


def test_a_missing_device_falls_back_with_one_line_on_stderr(capsys):
    lt.runtime.devices._state["noticed"].clear()
    assert lt.set_device("metal") == "cpu"
    lt.set_device("metal")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "device 'metal' is not available" in err


def test_unknown_device_names_the_choices():
    with pytest.raises(ValueError, match="auto, cuda, metal, virtual, cpu"):
        lt.set_device("tpu")


def test_values_survive_a_device_switch(rng):
    x = rng.normal(size=(256, 256)).astype("float32")
    lt.set_device("virtual")
    y = lt.tensor(x).exp().realize()
    lt.set_device("virtual")  # a second, separate device
    z = (y * 2).tanh()
    assert z.numpy().tobytes() == lt.tanh(lt.exp(lt.tensor(x)) * 2).numpy().tobytes()


def test_memory_budget_from_the_environment(monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_MEMORY_BUDGET", "3MiB")
    lt.set_device("virtual")
    assert lt.memory_budget() == 3 * 2 ** 20


def test_default_budget_is_a_quarter_of_free_device_memory():
    lt.set_device("virtual", memory="64MB")
    assert lt.memory_budget() == 16_000_000
    lt.set_device("cpu")
    assert lt.memory_budget() is None


@pytest.mark.parametrize("text,want", [("512MB", 512 * 10 ** 6), ("2GiB", 2 * 2 ** 30), ("64k", 65536),
                                       ("1000", 1000), (4096, 4096), ("1.5 GB", 1_500_000_000)])
def test_budget_strings(text, want):
    assert lt.runtime.memory.parse_bytes(text) == want


def test_bad_budget_strings_say_how_to_write_one():
    with pytest.raises(ValueError, match="512MB"):
        lt.set_memory_budget("lots")
