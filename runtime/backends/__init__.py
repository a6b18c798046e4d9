"""Executors. Every backend implements the contract of base.py (HostBackend or DeviceBackend)."""
from .base import DeviceBackend, HostBackend
from .numpy_backend import NumpyBackend

__all__ = ["DeviceBackend", "HostBackend", "NumpyBackend"]
