import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import lazytensor as lt

settings.register_profile("default", deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, max_examples=100, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "default")


def pytest_collection_modifyitems(items):
    """Tests that start the CUDA backend carry the `cuda` mark, so a GPU machine runs them alone (-m cuda)."""
    for item in items:
        if "cuda_device" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cuda)


@pytest.fixture(autouse=True)
def _fresh_engine():
    """Every test starts on the device the environment selects (LAZYTENSOR_DEVICE), with empty logs."""
    lt.runtime.memory.set_budget_override(None)
    lt.runtime.remat.set_recompute_ratio(1.0)
    lt.set_device(os.environ.get("LAZYTENSOR_DEVICE", "auto"))
    lt.reset_counters()
    lt.clear_transfer_log()
    lt.runtime.replay.repeats.clear()
    yield
    lt.set_device(os.environ.get("LAZYTENSOR_DEVICE", "auto"))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def virtual():
    """Switch to a fresh virtual device; call it with memory=/budget=/offload= to size it."""
    def start(memory="256MB", budget=None, offload="policy"):
        lt.set_device("virtual", memory=memory, offload=offload)
        return _fresh_logs(budget)
    yield start


def _fresh_logs(budget):
    """After starting a device: its budget (if given), an empty transfer log and zero counters."""
    if budget is not None:
        lt.set_memory_budget(budget)
    lt.clear_transfer_log()
    lt.reset_counters()
    return lt.runtime.devices.active_device()


@pytest.fixture
def cuda_device():
    """Switch to a fresh CUDA backend. The driver is LAZYTENSOR_TEST_CUDA_DRIVER: "emulated" by default
    (kernels compiled as C and run on the CPU), "cuda-bindings" or "pycuda" on a machine with a GPU
    (bench/device_check.py runs these tests that way)."""
    driver = os.environ.get("LAZYTENSOR_TEST_CUDA_DRIVER", "emulated")
    if driver == "emulated":
        from lazytensor.kernels.gpu import c_emulation
        if c_emulation.compiler() is None:
            pytest.skip("the emulated CUDA driver needs a C compiler (cc)")

    def start(offload="always", memory="256MB", budget=None):
        options = {"memory": memory} if driver == "emulated" else {}
        name = lt.set_device("cuda", driver=driver, offload=offload, **options)
        if name != "cuda":
            pytest.skip(f"the CUDA backend did not start with driver {driver!r}")
        return _fresh_logs(budget)
    yield start
