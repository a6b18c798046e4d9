"""`lt.version` in the shape of `torch.version`: this library's version; no CUDA or ROCm build is
compiled in (CUDA is reached at run time through a driver binding, see lt.devices())."""
__version__ = "0.1.0"
cuda = None
hip = None
debug = False
git_version = "unknown"
