"""The device a budget test trains on: a fresh virtual device, or for "cuda" the emulated CUDA driver
(the test skipped without a C compiler), every kernel offloaded, 256 MB of device memory."""
import pytest

import lazytensor as lt
from lazytensor.runtime import devices


def start(device):
    """Start `device` ("virtual" or "cuda") and return its backend."""
    if device == "cuda":
        from lazytensor.kernels.gpu import c_emulation
        if c_emulation.compiler() is None:
            pytest.skip("the emulated CUDA driver needs a C compiler (cc)")
        lt.set_device("cuda", driver="emulated", memory="256MB", offload="always")
    else:
        lt.set_device("virtual", memory="256MB", offload="always")
    return devices.chain()[0]
