"""Executors. Each backend has the same small interface (see base.Backend)."""
from .base import Backend
from .numpy_backend import NumpyBackend

__all__ = ["Backend", "NumpyBackend"]
