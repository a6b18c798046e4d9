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


@pytest.fixture(autouse=True)
def _fresh_engine():
    """Every test starts on the device the environment selects (LAZYTENSOR_DEVICE), with empty logs."""
    lt.runtime.memory.set_budget_override(None)
    lt.set_device(os.environ.get("LAZYTENSOR_DEVICE", "auto"))
    lt.reset_counters()
    lt.clear_transfer_log()
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
        if budget is not None:
            lt.set_memory_budget(budget)
        lt.clear_transfer_log()
        lt.reset_counters()
        return lt.runtime.devices.active_device()
    yield start
