"""Mixed precision in PyTorch's shape: `lt.autocast` / `lt.amp.autocast(device_type, dtype)` (also
`lt.cuda.amp.autocast`, `lt.cpu.amp.autocast`) and `lt.amp.GradScaler`.

Inside an autocast region for the device in use, the ops PyTorch runs in low precision (matrix products,
linear layers, convolutions, attention) cast their floating-point operands to the region's dtype
(bfloat16 on the CPU by default, float16 on CUDA); the ops PyTorch keeps in float32 (losses; on CUDA also
softmax, log-softmax and the normalizations) widen low-precision operands to float32. lazytensor computes
float16/bfloat16 ops in float32 and rounds each result once (docs/NUMERICS.md), so values follow
PyTorch's within the low-precision dtype's rounding. A region for another device than the one in use
changes nothing (as PyTorch, with a warning, when that device is not available).

`GradScaler` multiplies the loss by a scale, divides the gradients back (`unscale_`), skips the
optimizer's step when a gradient is infinite or NaN (one host read per step) and adapts the scale, as
PyTorch's. Constructed disabled (or for a device not in use), it passes everything through unchanged.
"""
import contextlib
import functools
import warnings

from . import dtypes
from .elementwise import cast
from .runtime import devices
from .tensor import Tensor

_REGIONS = []  # the autocast regions entered, innermost last: (device_type, dtype, enabled)
_DEFAULT_DTYPE = {"cpu": dtypes.bfloat16, "cuda": dtypes.float16}
_LOW = (dtypes.float16, dtypes.bfloat16)


def _device_in_use():
    return "cpu" if devices.chain()[0].is_host else devices.active_name()


def low_dtype():
    """The dtype the low-precision ops cast to now, or None outside an enabled region for this device."""
    if not _REGIONS:
        return None
    device_type, dtype, enabled = _REGIONS[-1]
    return dtype if enabled and device_type == _device_in_use() else None


def lower(*tensors):
    """The operands of a low-precision op, floating-point ones cast to the region's dtype (None stays)."""
    dtype = low_dtype()
    if dtype is None:
        return tensors
    return tuple(cast(t, dtype) if isinstance(t, Tensor) and t.dtype.is_floating_point and t.dtype is not dtype
                 else t for t in tensors)


# What PyTorch keeps in float32 under autocast, by device: losses everywhere; on CUDA also softmax,
# log-softmax and the normalizations (on the CPU those run in the operands' dtype).
_FLOAT32 = {"cpu": frozenset({"loss"}), "cuda": frozenset({"loss", "softmax", "norm"})}


def widen(*tensors, kind="loss"):
    """The operands of an op of `kind` ("loss", "softmax", "norm"): float16/bfloat16 ones cast to float32
    inside a region whose device keeps that kind in float32."""
    if low_dtype() is None or kind not in _FLOAT32[_REGIONS[-1][0]]:
        return tensors
    return tuple(cast(t, dtypes.float32) if isinstance(t, Tensor) and t.dtype in _LOW else t for t in tensors)


class autocast(contextlib.ContextDecorator):  # noqa: N801 (PyTorch's name)
    """`with lt.autocast("cpu"):` (or `lt.amp.autocast(device_type="cuda", dtype=lt.float16)`), and as a
    decorator: the ops inside run in mixed precision on that device (see the module docstring)."""

    def __init__(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=None):
        device_type = str(device_type).split(":")[0]
        if device_type not in _DEFAULT_DTYPE:
            raise ValueError(f"autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}")
        dtype = _DEFAULT_DTYPE[device_type] if dtype is None else dtypes.as_dtype(dtype)
        if dtype not in _LOW:
            if dtype not in (dtypes.float32, dtypes.float64):
                raise ValueError(f"autocast: dtype must be float16 or bfloat16 (or float32: no change), got {dtype}")
            # nanoGPT's --dtype=float32 passes float32 on CUDA, where PyTorch accepts it (nothing is lowered);
            # on the CPU PyTorch warns and disables the region
            if enabled and device_type == "cpu":
                warnings.warn(f"In CPU autocast, but the target dtype is not supported. Disabling autocast "
                              f"(CPU autocast lowers to bfloat16 or float16, not {dtype})", UserWarning, stacklevel=2)
            enabled = False
        if enabled and device_type == "cuda" and _device_in_use() != "cuda":
            warnings.warn("autocast: device_type 'cuda' is given but CUDA is not the device in use; this region "
                          "changes nothing", UserWarning, stacklevel=2)
        self.region = (device_type, dtype, bool(enabled))

    def __enter__(self):
        _REGIONS.append(self.region)
        return self

    def __exit__(self, *exc):
        _REGIONS.pop()
        return False


def is_autocast_enabled(device_type=None):
    if not _REGIONS:
        return False
    region = _REGIONS[-1]
    return region[2] and (device_type is None or region[0] == device_type)


def custom_fwd(fwd=None, *, device_type="cuda", cast_inputs=None):
    """PyTorch's decorator for a custom function's forward: accepted, the function runs as written."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    return fwd


def custom_bwd(bwd=None, *, device_type="cuda"):
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    return bwd


class GradScaler:
    """PyTorch's gradient scaler (see the module docstring): `scaler.scale(loss).backward()`,
    `scaler.step(optimizer)`, `scaler.update()`; `unscale_(optimizer)` before clipping gradients."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        device = str(device).split(":")[0]
        if enabled and device == "cuda" and _device_in_use() != "cuda":
            warnings.warn("GradScaler: CUDA is not the device in use; the scaler is disabled (it passes the loss "
                          "and the optimizer's step through)", UserWarning, stacklevel=2)
            enabled = False
        if growth_factor <= 1.0 or not 0.0 < backoff_factor < 1.0:
            raise ValueError("GradScaler: growth_factor must be above 1 and backoff_factor in (0, 1)")
        self._enabled, self._scale = bool(enabled), float(init_scale)
        self._growth, self._backoff, self._interval = float(growth_factor), float(backoff_factor), int(growth_interval)
        self._tracker = 0
        self._unscaled = {}  # id(optimizer) -> whether an inf or NaN was found, for this step

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def scale(self, outputs):
        """`outputs` (a tensor, or a list/tuple of them) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return outputs * self._scale

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale, now (once per step), noting any inf or NaN."""
        if not self._enabled:
            return
        if id(optimizer) in self._unscaled:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update()")
        grads = []
        inv = 1.0 / self._scale
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad = p.grad * inv
                    grads.append(p.grad)
        if grads:
            finite = grads[0].isfinite().all()
            for g in grads[1:]:
                finite = finite & g.isfinite().all()
            self._unscaled[id(optimizer)] = not bool(finite)
        else:
            self._unscaled[id(optimizer)] = False

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step() unless a gradient is infinite or NaN (unscaling first if not done)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if id(optimizer) not in self._unscaled:
            self.unscale_(optimizer)
        if self._unscaled[id(optimizer)]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """After the step: back off on an inf or NaN, grow after `growth_interval` clean steps."""
        if not self._enabled:
            return
        found_inf = any(self._unscaled.values())
        self._unscaled = {}
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
            return
        if found_inf:
            self._scale *= self._backoff
            self._tracker = 0
        else:
            self._tracker += 1
            if self._tracker == self._interval:
                self._scale *= self._growth
                self._tracker = 0

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth, "backoff_factor": self._backoff,
                "growth_interval": self._interval, "_growth_tracker": self._tracker}

    def load_state_dict(self, state):
        if state:
            self._scale, self._growth = float(state["scale"]), float(state["growth_factor"])
            self._backoff, self._interval = float(state["backoff_factor"]), int(state["growth_interval"])
            self._tracker = int(state["_growth_tracker"])
