"""`lt.backends` in the shape of `torch.backends`: the flags programs set before training (TF32, cuDNN's
autotuner, determinism) as settable attributes. lazytensor has no cuDNN and computes float32 products in
float32 (never TF32), and its kernels are deterministic, so the flags are recorded and change nothing."""
import sys as _sys


class _Flags:
    """A namespace of settable flags (a misspelt one is an AttributeError, as in PyTorch)."""

    def __init__(self, doc, **flags):
        object.__setattr__(self, "_doc", doc)
        for k, v in flags.items():
            object.__setattr__(self, k, v)

    def __setattr__(self, name, value):
        if name not in self.__dict__:
            raise AttributeError(f"{self._doc} has no flag {name!r}; it has {', '.join(self._names())}")
        object.__setattr__(self, name, value)

    def _names(self):
        return [k for k, v in self.__dict__.items() if not k.startswith("_") and not callable(v)]


cuda = _Flags("lt.backends.cuda", matmul=_Flags("lt.backends.cuda.matmul", allow_tf32=False,
                                                allow_fp16_reduced_precision_reduction=True,
                                                allow_bf16_reduced_precision_reduction=True),
              is_built=lambda: True)
cudnn = _Flags("lt.backends.cudnn", enabled=True, benchmark=False, deterministic=False, allow_tf32=True,
               is_available=lambda: False, version=lambda: None)
mps = _Flags("lt.backends.mps", is_available=lambda: False, is_built=lambda: False)
mkldnn = _Flags("lt.backends.mkldnn", enabled=True, is_available=lambda: False)
opt_einsum = _Flags("lt.backends.opt_einsum", enabled=True, strategy="auto", is_available=lambda: True)

# `import torch.backends.cudnn as cudnn` is how programs reach these: each namespace is importable by its name.
for _name in ("cuda", "cudnn", "mps", "mkldnn", "opt_einsum"):
    _sys.modules[f"{__name__}.{_name}"] = globals()[_name]
