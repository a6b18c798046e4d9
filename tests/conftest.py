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
def _fresh_counters():
    lt.reset_counters()
    yield


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
