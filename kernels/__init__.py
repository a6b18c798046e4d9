"""Kernels: the code that computes an op, one sub-package per executor family.

`reference` holds the NumPy definitions every backend is tested against. Kernels never import the runtime.
"""
