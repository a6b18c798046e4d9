"""Vision-layer functions and modules in PyTorch's shape: channel dropout (`F.dropout1d/2d/3d`,
Dropout1d/2d/3d), `F.pixel_shuffle`/`pixel_unshuffle` (PixelShuffle, PixelUnshuffle), the reflect,
replicate and circular modes of `F.pad`, and `F.interpolate` (Upsample) in nearest, linear, bilinear
and trilinear modes.

Padding and interpolation gather along one axis at a time with an index tensor (one `index_select`
each), so gradients flow back through the gathers; interpolation weights are PyTorch's source
coordinates (half-pixel unless align_corners).
"""
import math

import numpy as np

from ..creation import from_numpy
from ..random import bernoulli_mask
from .module import Module


# ---- channel dropout ------------------------------------------------------------------------------------
def _channel_dropout(x, p, training, spatial, name):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}: p must be in [0, 1], got {p}")
    if x.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"{name}: expected a {spatial + 1}-D or {spatial + 2}-D input, got shape {x.shape}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    channels = x.shape[:x.ndim - spatial]
    mask = bernoulli_mask(channels + (1,) * spatial, 1.0 - p, x.dtype)
    return x * mask * (1.0 / (1.0 - p))


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) with probability p, the rest scaled by 1/(1-p)."""
    return _channel_dropout(input, p, training, 1, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) or (C, H, W) with probability p, the rest scaled by 1/(1-p)."""
    return _channel_dropout(input, p, training, 2, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) with probability p, the rest scaled."""
    return _channel_dropout(input, p, training, 3, "dropout3d")


class _ChannelDropout(Module):
    _fn = None

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x):
        return type(self)._fn(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class Dropout1d(_ChannelDropout):
    _fn = staticmethod(dropout1d)


class Dropout2d(_ChannelDropout):
    _fn = staticmethod(dropout2d)


class Dropout3d(_ChannelDropout):
    _fn = staticmethod(dropout3d)


# ---- pixel shuffle --------------------------------------------------------------------------------------
def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r): each r x r block of the output from r^2 channels."""
    r = int(upscale_factor)
    *lead, c, h, w = input.shape
    if r < 1 or c % (r * r):
        raise ValueError(f"pixel_shuffle: {c} channels are not a multiple of upscale_factor^2 = {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W), pixel_shuffle's inverse."""
    r = int(downscale_factor)
    *lead, c, h, w = input.shape
    if r < 1 or h % r or w % r:
        raise ValueError(f"pixel_unshuffle: height {h} and width {w} must be multiples of downscale_factor {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


class PixelShuffle(Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x):
        return pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x):
        return pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


# ---- padding by index -----------------------------------------------------------------------------------
def _pad_positions(n, before, after, mode):
    """The source position of each padded position along an axis of `n` (PyTorch's reflect mirrors
    without repeating the edge; replicate repeats it; circular wraps)."""
    at = np.arange(-before, n + after)
    if mode == "replicate":
        return np.clip(at, 0, n - 1)
    if mode == "circular":
        return at % n
    period = 2 * (n - 1)
    at = np.abs(at) % period if period else np.zeros_like(at)
    return np.where(at >= n, period - at, at)


def pad_by_index(x, pad, mode):
    """F.pad in reflect, replicate or circular mode: (before, after) pairs from the last dim backwards,
    at most three dims (PyTorch's limit), each one gather."""
    pairs = len(pad) // 2
    if pairs > 3 or x.ndim < pairs + 1:
        raise ValueError(f"pad: mode={mode!r} pads at most the last 3 dims of an input with a batch or channel "
                         f"axis before them; got {pairs} pairs for shape {x.shape}")
    out = x
    for i in range(pairs):
        d = x.ndim - 1 - i
        before, after, n = int(pad[2 * i]), int(pad[2 * i + 1]), x.shape[d]
        if mode == "reflect" and (before >= n or after >= n):
            raise ValueError(f"pad: reflect padding ({before}, {after}) must be smaller than the dim it pads ({n})")
        if mode == "circular" and (before > n or after > n):
            raise ValueError(f"pad: circular padding ({before}, {after}) must be at most the dim it pads ({n})")
        if min(before, after) < 0:
            raise ValueError(f"pad: mode={mode!r} takes no negative padding, got ({before}, {after})")
        if before or after:
            out = out.index_select(d, from_numpy(_pad_positions(n, before, after, mode).astype(np.int64)))
    return out


# ---- interpolation --------------------------------------------------------------------------------------
_SPATIAL = {"linear": 1, "bilinear": 2, "trilinear": 3}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """PyTorch's F.interpolate of (N, C, *spatial) inputs to `size` or by `scale_factor`: nearest (the
    source index floor(i * scale)), nearest-exact, linear, bilinear or trilinear (each axis in turn)."""
    spatial = input.ndim - 2
    if spatial < 1:
        raise ValueError(f"interpolate: expected (N, C, ...) with spatial axes, got shape {input.shape}")
    if mode in _SPATIAL and _SPATIAL[mode] != spatial:
        raise ValueError(f"interpolate: mode={mode!r} takes {_SPATIAL[mode] + 2}-D input, got {input.ndim}-D")
    if mode not in ("nearest", "nearest-exact", *_SPATIAL):
        raise NotImplementedError(f"interpolate: mode={mode!r} is not supported (nearest, nearest-exact, linear, "
                                  f"bilinear, trilinear)")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    if align_corners is not None and mode not in _SPATIAL:
        raise ValueError("interpolate: align_corners applies to the linear modes only")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor")
    in_sizes = input.shape[2:]
    if size is not None:
        sizes = tuple(size) if isinstance(size, (list, tuple)) else (size,) * spatial
        scales = [None] * spatial
    else:
        factors = tuple(scale_factor) if isinstance(scale_factor, (list, tuple)) else (scale_factor,) * spatial
        sizes = tuple(int(math.floor(n * f)) for n, f in zip(in_sizes, factors))
        scales = [None if recompute_scale_factor else float(f) for f in factors]
    if len(sizes) != spatial or any(s < 1 for s in sizes):
        raise ValueError(f"interpolate: output size {sizes} does not fit {spatial} spatial axes")
    out = input
    for axis, (n_in, n_out, scale) in enumerate(zip(in_sizes, sizes, scales)):
        d = 2 + axis
        if mode.startswith("nearest"):
            out = out.index_select(d, from_numpy(_nearest(n_in, n_out, scale, mode == "nearest-exact")))
        else:
            out = _linear_along(out, d, n_in, n_out, scale, bool(align_corners))
    return out


def _ratio(n_in, n_out, scale):
    """PyTorch's source-per-output ratio: 1/scale_factor when one was given, else n_in / n_out."""
    return 1.0 / scale if scale is not None else n_in / n_out


def _nearest(n_in, n_out, scale, exact):
    # in float32, as PyTorch's kernels compute source indices (a float64 product can floor differently)
    ratio, at = np.float32(_ratio(n_in, n_out, scale)), np.arange(n_out, dtype=np.float32)
    src = np.floor((at + np.float32(0.5)) * ratio) if exact else np.floor(at * ratio)
    return np.minimum(src, n_in - 1).astype(np.int64)


def _linear_along(x, d, n_in, n_out, scale, align_corners):
    real = np.float64 if x.dtype.itemsize > 4 else np.float32  # PyTorch computes the coordinates so
    at = np.arange(n_out, dtype=real)
    if align_corners:
        src = at * real((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(n_out, real)
    else:
        src = np.maximum((at + real(0.5)) * real(_ratio(n_in, n_out, scale)) - real(0.5), real(0.0))
    low = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    high = np.minimum(low + 1, n_in - 1)
    frac = (src - low).astype(real)
    shape = [1] * x.ndim
    shape[d] = n_out
    w = from_numpy(frac.reshape(shape)).to(x.dtype)
    a, b = x.index_select(d, from_numpy(low)), x.index_select(d, from_numpy(high))
    return a + (b - a) * w


class Upsample(Module):
    """F.interpolate as a module (PyTorch's Upsample)."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x):
        return interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)

    def extra_repr(self):
        what = f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"


__all__ = ["dropout1d", "dropout2d", "dropout3d", "Dropout1d", "Dropout2d", "Dropout3d", "pixel_shuffle",
           "pixel_unshuffle", "PixelShuffle", "PixelUnshuffle", "pad_by_index", "interpolate", "Upsample"]
