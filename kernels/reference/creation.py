"""Leaf kernels that make values from attributes alone (no inputs)."""
import numpy as np


def full(attrs):
    return np.full(attrs["shape"], attrs["value"], dtype=np.dtype(attrs["dtype"]))


def arange(attrs):
    dtype = np.dtype(attrs["dtype"])
    n = attrs["shape"][0]
    if dtype.kind == "f":
        # start + i * step in float64, rounded once: the same formula a device kernel uses per thread.
        return (attrs["start"] + np.arange(n, dtype=np.float64) * attrs["step"]).astype(dtype)
    return (attrs["start"] + np.arange(n, dtype=np.int64) * attrs["step"]).astype(dtype)


def linspace(attrs):
    n = attrs["shape"][0]
    return np.linspace(attrs["start"], attrs["stop"], n, dtype=np.float64).astype(np.dtype(attrs["dtype"]))


def eye(attrs):
    n, m = attrs["shape"]
    return np.eye(n, m, dtype=np.dtype(attrs["dtype"]))


CREATION_KERNELS = {"full": full, "arange": arange, "linspace": linspace, "eye": eye}
