"""Convolution and pooling over windows (F.conv1d/2d/3d, max/avg pooling in one to three dimensions,
adaptive pooling): one `im2col` node gathers the windows (kernels/reference/window.py), then `conv_product`
(one product per group over every image) or a reduction over them; the 3-D forms run the 2-D ones per depth
offset of the window, every output depth at once. A convolution's input gradient is one `conv_input_grad` node, its
weight's one product with the windows (lazytensor/autograd.py); a pooling's goes through `col2im`."""
import math

import numpy as np

from .. import amp as _amp, creation
from ..shape_ops import cat, stack
from ..tensor import Tensor


def pair(value, name, n=2):
    """`value` as an n-tuple of ints (an int is repeated), PyTorch's convention for kernel_size etc."""
    if isinstance(value, (list, tuple)):
        if len(value) != n or not all(isinstance(v, int) for v in value):
            raise ValueError(f"{name} must be an int or {n} ints, got {value!r}")
        return tuple(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int or {n} ints, got {value!r}")
    return (value,) * n


def windows(x, kernel, stride, padding, dilation, pad_value=0.0, name="conv2d"):
    """(C, kh, kw, N, Ho, Wo): every window of the (N, C, H, W) tensor `x`, channels and offsets first;
    ValueError naming `name` (the user's function) for a bad geometry."""
    N, C, H, W = x.shape
    kh, kw = kernel
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    if min(kh, kw, sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        raise ValueError(f"{name}: kernel, stride and dilation must be positive and padding non-negative, got "
                         f"kernel {kernel}, stride {stride}, padding {padding}, dilation {dilation}")
    Ho = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    Wo = (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if Ho < 1 or Wo < 1:
        raise ValueError(f"{name}: the input's spatial size {(H, W)} (padded by {padding}) is smaller than the "
                         f"kernel {kernel} (dilation {dilation})")
    attrs = {"kernel": (kh, kw), "stride": (sh, sw), "padding": (ph, pw), "dilation": (dh, dw),
             "pad_value": float(pad_value)}
    return Tensor._from_op("im2col", (x,), attrs, (C, kh, kw, N, Ho, Wo), x.dtype)


def _padding(padding, kernel, dilation, stride, name):
    if padding == "valid":
        return (0,) * len(kernel)
    if padding == "same":
        if any(s != 1 for s in stride):
            raise ValueError(f"{name}: padding='same' needs stride 1")
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        if any(t % 2 for t in total):
            raise NotImplementedError(f"{name}: padding='same' with an even kernel extent {kernel} (uneven padding)")
        return tuple(t // 2 for t in total)
    return pair(padding, f"{name}: padding", len(kernel))


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, _name="conv2d"):
    """PyTorch's F.conv2d: (N, C, H, W) (or unbatched (C, H, W)) with weight (O, C/groups, kh, kw)."""
    if input.ndim == 3:
        return conv2d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0)
    if _amp._REGIONS:  # autocast: convolutions in low precision, the bias too
        input, weight, bias = _amp.lower(input, weight, bias)
    if input.ndim != 4 or weight.ndim != 4:
        raise ValueError(f"conv2d: expected input (N, C, H, W) and weight (O, C/groups, kh, kw), got "
                         f"{input.shape} and {weight.shape}")
    N, C = input.shape[:2]
    O, Cg, kh, kw = weight.shape
    if groups < 1 or C % groups or O % groups or Cg != C // groups:
        raise ValueError(f"conv2d: input has {C} channels, weight {weight.shape} with groups={groups} expects "
                         f"{Cg * groups}")
    stride, dilation = pair(stride, f"{_name}: stride"), pair(dilation, f"{_name}: dilation")
    padding = _padding(padding, (kh, kw), dilation, stride, _name)
    cols = windows(input, (kh, kw), stride, padding, dilation, name=_name)
    Ho, Wo = cols.shape[4:]
    if weight.dtype != input.dtype:
        raise TypeError(f"conv2d: the input is {input.dtype} and the weight {weight.dtype}; convert one (PyTorch "
                        f"requires them to match too)")
    # the output from the windows by one product per group over every image; its gradients: the
    # weight's one product, the input's one conv_input_grad node (lazytensor/autograd.py)
    attrs = {**cols._node.attrs, "groups": groups, "shape": input.shape}
    out = Tensor._from_op("conv_product", (input, cols, weight), attrs, (N, O, Ho, Wo), input.dtype)
    return out if bias is None else out + bias.reshape(O, 1, 1)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """PyTorch's F.conv1d: (N, C, L) (or (C, L)) with weight (O, C/groups, k), as a conv2d of height 1."""
    if input.ndim == 2:
        return conv1d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0)
    if input.ndim != 3 or weight.ndim != 3:
        raise ValueError(f"conv1d: expected input (N, C, L) and weight (O, C/groups, k), got {input.shape} and "
                         f"{weight.shape}")
    (s,), (d,) = pair(stride, "conv1d: stride", 1), pair(dilation, "conv1d: dilation", 1)
    (p,) = _padding(padding, (weight.shape[2],), (d,), (s,), "conv1d")
    out = conv2d(input.unsqueeze(2), weight.unsqueeze(2), bias, (1, s), (0, p), (1, d), groups, _name="conv1d")
    return out.squeeze(2)


def _depth_out(name, depth, padding, dilation, kernel, stride):
    """The output depth of a 3-D window op; ValueError naming `name` when the kernel does not fit."""
    out = (depth + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1
    if out < 1:
        raise ValueError(f"{name}: the input's depth {depth} (padded by {padding}) is smaller than the kernel's "
                         f"{kernel} (dilation {dilation})")
    return out


def _padded_depth(x, padding, value):
    """(N, C, D, H, W) `x` with `padding` planes of `value` before and after along the depth."""
    if not padding:
        return x
    N, C, _, H, Wd = x.shape
    edge = creation.full((N, C, padding, H, Wd), value, dtype=x.dtype)
    return cat([edge, x, edge], 2)


def _depth_planes(x, offset, dilation, stride, depth_out):
    """The planes a 3-D window's depth offset `offset` reads for every output depth, as a (N * Do, C, H, W)
    batch of images (x is (N, C, D, H, W), padded)."""
    N, C, _, H, Wd = x.shape
    first = offset * dilation
    planes = x[:, :, first:first + stride * (depth_out - 1) + 1:stride]
    return planes.permute(0, 2, 1, 3, 4).reshape(N * depth_out, C, H, Wd)


def _from_planes(out, N, depth_out):
    """A (N * Do, C, Ho, Wo) result of _depth_planes' images as (N, C, Do, Ho, Wo)."""
    return out.reshape(N, depth_out, *out.shape[1:]).permute(0, 2, 1, 3, 4)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """PyTorch's F.conv3d: (N, C, D, H, W) (or unbatched) with weight (O, C/groups, kd, kh, kw): for each
    depth offset of the kernel, one conv2d over every output depth at once (the depths folded into the
    batch), and the kd results summed."""
    if input.ndim == 4:
        return conv3d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0)
    if input.ndim != 5 or weight.ndim != 5:
        raise ValueError(f"conv3d: expected input (N, C, D, H, W) and weight (O, C/groups, kd, kh, kw), got "
                         f"{input.shape} and {weight.shape}")
    if _amp._REGIONS:  # autocast: convolutions in low precision, the bias too
        input, weight, bias = _amp.lower(input, weight, bias)
    stride, dilation = pair(stride, "conv3d: stride", 3), pair(dilation, "conv3d: dilation", 3)
    padding = _padding(padding, weight.shape[2:], dilation, stride, "conv3d")
    if min(stride + dilation) < 1 or min(padding) < 0:
        raise ValueError(f"conv3d: stride and dilation must be positive and padding non-negative, got stride "
                         f"{stride}, padding {padding}, dilation {dilation}")
    N, O, kd = input.shape[0], weight.shape[0], weight.shape[2]
    Do = _depth_out("conv3d", input.shape[2], padding[0], dilation[0], kd, stride[0])
    x = _padded_depth(input, padding[0], 0.0)
    out = None
    for k in range(kd):
        part = conv2d(_depth_planes(x, k, dilation[0], stride[0], Do), weight[:, :, k], None, stride[1:],
                      padding[1:], dilation[1:], groups, _name="conv3d")
        out = part if out is None else out + part
    out = _from_planes(out, N, Do)
    return out if bias is None else out + bias.reshape(O, 1, 1, 1)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """PyTorch's F.conv_transpose2d: (N, C_in, H, W) (or unbatched) with weight (C_in, C_out/groups, kh, kw),
    the gradient of a convolution with respect to its input: W^T @ the input's pixels, added back into
    the output's windows (one product per group, one `col2im`; both have gradients)."""
    if input.ndim == 3:
        return conv_transpose2d(input.unsqueeze(0), weight, bias, stride, padding, output_padding, groups,
                                dilation).squeeze(0)
    if input.ndim != 4 or weight.ndim != 4:
        raise ValueError(f"conv_transpose2d: expected input (N, C_in, H, W) and weight (C_in, C_out/groups, kh, kw),"
                         f" got {input.shape} and {weight.shape}")
    if _amp._REGIONS:
        input, weight, bias = _amp.lower(input, weight, bias)
    N, C, H, W = input.shape
    Cw, Cg, kh, kw = weight.shape
    if groups < 1 or Cw != C or C % groups:
        raise ValueError(f"conv_transpose2d: input has {C} channels, weight {weight.shape} with groups={groups} "
                         f"expects {Cw} (divisible by groups)")
    (sh, sw), (ph, pw) = pair(stride, "conv_transpose2d: stride"), pair(padding, "conv_transpose2d: padding")
    (oh, ow), (dh, dw) = pair(output_padding, "conv_transpose2d: output_padding"), pair(dilation,
                                                                                         "conv_transpose2d: dilation")
    if min(kh, kw, sh, sw, dh, dw) < 1 or min(ph, pw, oh, ow) < 0:
        raise ValueError(f"conv_transpose2d: kernel, stride and dilation must be positive and padding non-negative, "
                         f"got kernel {(kh, kw)}, stride {(sh, sw)}, padding {(ph, pw)}, dilation {(dh, dw)}")
    if oh >= max(sh, dh) or ow >= max(sw, dw):
        raise ValueError(f"conv_transpose2d: output_padding {(oh, ow)} must be smaller than the stride {(sh, sw)} or "
                         f"the dilation {(dh, dw)}")
    Ho, Wo = (H - 1) * sh - 2 * ph + dh * (kh - 1) + oh + 1, (W - 1) * sw - 2 * pw + dw * (kw - 1) + ow + 1
    if Ho < 1 or Wo < 1:
        raise ValueError(f"conv_transpose2d: the output would be {(Ho, Wo)}; the padding is too large")
    lead = (groups,) if groups > 1 else ()
    pixels = input.permute(1, 0, 2, 3).reshape(*lead, C // groups, N * H * W)
    cols = (weight.reshape(*lead, C // groups, -1).mT @ pixels).reshape(Cg * groups, kh, kw, N, H, W)
    attrs = {"kernel": (kh, kw), "stride": (sh, sw), "padding": (ph, pw), "dilation": (dh, dw), "pad_value": 0.0,
             "groups": groups, "shape": (N, Cg * groups, Ho, Wo)}
    out = Tensor._from_op("col2im", (cols,), attrs, (N, Cg * groups, Ho, Wo), cols.dtype)
    return out if bias is None else out + bias.reshape(-1, 1, 1)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """PyTorch's F.conv_transpose1d: (N, C_in, L) with weight (C_in, C_out/groups, k), as height 1."""
    if input.ndim == 2:
        return conv_transpose1d(input.unsqueeze(0), weight, bias, stride, padding, output_padding, groups,
                                dilation).squeeze(0)
    (s,), (p,) = pair(stride, "conv_transpose1d: stride", 1), pair(padding, "conv_transpose1d: padding", 1)
    (o,), (d,) = pair(output_padding, "conv_transpose1d: output_padding", 1), pair(dilation,
                                                                                   "conv_transpose1d: dilation", 1)
    out = conv_transpose2d(input.unsqueeze(2), weight.unsqueeze(2), bias, (1, s), (0, p), (0, o), groups, (1, d))
    return out.squeeze(2)


def _pool_args(name, kernel_size, stride, padding, dilation, n):
    kernel = pair(kernel_size, f"{name}: kernel_size", n)
    stride = kernel if stride is None or stride == () or stride == [] else pair(stride, f"{name}: stride", n)
    padding, dilation = pair(padding, f"{name}: padding", n), pair(dilation, f"{name}: dilation", n)
    if any(2 * p > k for p, k in zip(padding, kernel)):
        raise ValueError(f"{name}: padding {padding} must be at most half the kernel size {kernel}")
    return kernel, stride, padding, dilation


def _batched(pool, x, ndim):
    """Run `pool` on a batched input: an unbatched one gets a batch axis for the call."""
    return pool(x.unsqueeze(0)).squeeze(0) if x.ndim == ndim - 1 else pool(x)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False,
               _name="max_pool2d"):
    """The largest value of each window (the first one, for gradients, as PyTorch picks)."""
    if ceil_mode or return_indices:
        raise NotImplementedError(f"{_name}: ceil_mode and return_indices are not supported")
    kernel, stride, padding, dilation = _pool_args(_name, kernel_size, stride, padding, dilation, 2)

    def pool(x):
        cols = windows(x, kernel, stride, padding, dilation, pad_value=-math.inf, name=_name)
        C, kh, kw, N, Ho, Wo = cols.shape
        flat = cols.reshape(C, kh * kw, N, Ho, Wo)
        return flat.gather(1, flat.argmax(dim=1, keepdim=True)).squeeze(1).permute(1, 0, 2, 3)
    return _batched(pool, input, 4)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None, _name="avg_pool2d"):
    """The mean of each window (padding counted as zeros, PyTorch's default)."""
    if ceil_mode or not count_include_pad:
        raise NotImplementedError(f"{_name}: ceil_mode and count_include_pad=False are not supported")
    kernel, stride, padding, dilation = _pool_args(_name, kernel_size, stride, padding, 1, 2)

    def pool(x):
        total = windows(x, kernel, stride, padding, dilation, name=_name).sum(dim=(1, 2)).permute(1, 0, 2, 3)
        return total / float(divisor_override or kernel[0] * kernel[1])
    return _batched(pool, input, 4)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """PyTorch's F.max_pool3d over (N, C, D, H, W) (or unbatched): a max_pool2d per depth offset of the
    window, then the largest of those (the first, in the window's depth, height, width order, for
    gradients, as PyTorch picks)."""
    if ceil_mode or return_indices:
        raise NotImplementedError("max_pool3d: ceil_mode and return_indices are not supported")
    kernel, stride, padding, dilation = _pool_args("max_pool3d", kernel_size, stride, padding, dilation, 3)

    def pool(x):
        N = x.shape[0]
        Do = _depth_out("max_pool3d", x.shape[2], padding[0], dilation[0], kernel[0], stride[0])
        x = _padded_depth(x, padding[0], -math.inf)
        maxima = stack([max_pool2d(_depth_planes(x, k, dilation[0], stride[0], Do), kernel[1:], stride[1:],
                                   padding[1:], dilation[1:], _name="max_pool3d") for k in range(kernel[0])], 0)
        return _from_planes(maxima.gather(0, maxima.argmax(dim=0, keepdim=True)).squeeze(0), N, Do)
    return _batched(pool, input, 5)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """PyTorch's F.avg_pool3d over (N, C, D, H, W) (or unbatched): the windows' sums per depth offset
    (avg_pool2d's), added, over the window's size (padding counted as zeros, PyTorch's default)."""
    if ceil_mode or not count_include_pad:
        raise NotImplementedError("avg_pool3d: ceil_mode and count_include_pad=False are not supported")
    kernel, stride, padding, _ = _pool_args("avg_pool3d", kernel_size, stride, padding, 1, 3)

    def pool(x):
        N = x.shape[0]
        Do = _depth_out("avg_pool3d", x.shape[2], padding[0], 1, kernel[0], stride[0])
        x = _padded_depth(x, padding[0], 0.0)
        total = None
        for k in range(kernel[0]):
            part = avg_pool2d(_depth_planes(x, k, 1, stride[0], Do), kernel[1:], stride[1:], padding[1:],
                              divisor_override=1, _name="avg_pool3d")
            total = part if total is None else total + part
        return _from_planes(total, N, Do) / float(divisor_override or math.prod(kernel))
    return _batched(pool, input, 5)


def _as_1d(pool2d, name):
    """`pool2d` over (N, C, L) inputs as windows of height 1, its errors naming `name`."""
    def pool1d(input, kernel_size, stride=None, padding=0, *rest, **kwargs):
        k, = pair(kernel_size, f"{name}: kernel_size", 1)
        s = None if stride is None else pair(stride, f"{name}: stride", 1)[0]
        p, = pair(padding, f"{name}: padding", 1)
        out = pool2d(input.unsqueeze(-2), (1, k), None if s is None else (1, s), (0, p), *rest, _name=name, **kwargs)
        return out.squeeze(-2)
    pool1d.__name__ = name
    pool1d.__doc__ = f"PyTorch's F.{name}: {pool2d.__name__} over windows of height 1."
    return pool1d


max_pool1d = _as_1d(max_pool2d, "max_pool1d")
avg_pool1d = _as_1d(avg_pool2d, "avg_pool1d")


def _adaptive_windows(size, out):
    """PyTorch's adaptive windows along an axis of `size` pooled to `out` cells, as (index, weight):
    cell i covers [floor(i*size/out), ceil((i+1)*size/out)); `index` (out, K) lists each window's
    positions, the shorter ones padded by repeating their last; `weight` is 1/length there, 0 in the
    padding."""
    i = np.arange(out)
    start, end = (i * size) // out, -(-((i + 1) * size) // out)
    k = int((end - start).max())
    index = np.minimum(start[:, None] + np.arange(k), end[:, None] - 1)
    weight = np.where(start[:, None] + np.arange(k) < end[:, None], 1.0 / (end - start)[:, None], 0.0)
    return index, weight


def _pooled_axis(x, dim, out, reduce):
    """`x` pooled along `dim` into `out` adaptive windows: the windows gathered at once (one index_select),
    then `reduce(gathered, index, weight, window_dim)`."""
    index, weight = _adaptive_windows(x.shape[dim], out)
    gathered = x.index_select(dim, creation.from_numpy(index.reshape(-1)))
    shape = list(x.shape)
    shape[dim:dim + 1] = index.shape
    return reduce(gathered.reshape(shape), weight, dim + 1)


def _mean_of_window(gathered, weight, dim):
    w = creation.from_numpy(weight.astype(gathered.dtype.np)).reshape(weight.shape + (1,) * (gathered.ndim - dim - 1))
    return (gathered * w).sum(dim=dim)


def _max_of_window(gathered, weight, dim):
    return gathered.gather(dim, gathered.argmax(dim=dim, keepdim=True)).squeeze(dim)


def _adaptive(input, output_size, name, even, reduce):
    """PyTorch's adaptive windows: cell i covers [floor(i*H/out), ceil((i+1)*H/out)) (None keeps the
    size). Sizes that divide the input are one pooling `even(input, kernel)`; others pool the rows, then
    the columns, each through one gather of every window (`_pooled_axis`)."""
    out_hw = tuple(output_size) if isinstance(output_size, (list, tuple)) else pair(output_size, name)
    if len(out_hw) != 2 or not all(o is None or (isinstance(o, int) and o > 0) for o in out_hw):
        raise ValueError(f"{name} must be a positive int or two of them (None keeps a size), got {output_size!r}")
    if input.ndim not in (3, 4):
        raise ValueError(f"{name.split(':')[0]}: expected (N, C, H, W) or (C, H, W), got shape {input.shape}")
    H, W = input.shape[-2:]
    oh, ow = (size if o is None else o for o, size in zip(out_hw, (H, W)))
    if H % oh == 0 and W % ow == 0:
        return even(input, (H // oh, W // ow))
    rows = _pooled_axis(input, input.ndim - 2, oh, reduce)
    return _pooled_axis(rows, rows.ndim - 1, ow, reduce)


def adaptive_avg_pool2d(input, output_size):
    """Means over PyTorch's adaptive windows."""
    return _adaptive(input, output_size, "adaptive_avg_pool2d: output_size", lambda x, k: avg_pool2d(x, k, k),
                     _mean_of_window)


def adaptive_avg_pool1d(input, output_size):
    (o,) = pair(output_size, "adaptive_avg_pool1d: output_size", 1)
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, o)).squeeze(-2)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Maxima over PyTorch's adaptive windows (the first largest gets the gradient, as in PyTorch)."""
    if return_indices:
        raise NotImplementedError("adaptive_max_pool2d: return_indices is not supported")
    return _adaptive(input, output_size, "adaptive_max_pool2d: output_size", max_pool2d, _max_of_window)
