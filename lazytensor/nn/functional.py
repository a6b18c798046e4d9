"""Functional forms of the layers: linear, embedding, layer_norm, dropout, activations, attention, and the
losses (cross_entropy here, the others in losses.py)."""
import math

from .. import amp as _amp, dtypes
from ..activations import log_softmax, softmax  # noqa: F401  (re-exported)
from ..creation import arange, full, ones
from ..indexing import embedding_rows
from ..random import bernoulli_mask
from ..recompute import recomputed
from ..shape_ops import cat
from ..tensor import Tensor
from . import losses as _losses
from .losses import (binary_cross_entropy, binary_cross_entropy_with_logits, huber_loss, kl_div,  # noqa: F401
                     l1_loss, mse_loss, nll_loss, smooth_l1_loss)
from .windows import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool2d, avg_pool1d,  # noqa: F401
                      avg_pool2d, avg_pool3d, conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, max_pool1d,
                      max_pool2d, max_pool3d)
from .normalization import batch_norm, group_norm, instance_norm  # noqa: F401
from .vision import (dropout1d, dropout2d, dropout3d, interpolate, pad_by_index, pixel_shuffle,  # noqa: F401
                     pixel_unshuffle)
from .activation_functions import (celu, elu, glu, hardsigmoid, hardswish, hardtanh, leaky_relu,  # noqa: F401
                                   logsigmoid, mish, relu6, selu, softmin, softplus, softsign, tanhshrink,
                                   threshold)

_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def linear(x, weight, bias=None):
    if _amp._REGIONS:  # autocast: the layer in low precision, its bias too (PyTorch's rule)
        x, weight, bias = _amp.lower(x, weight, bias)
    out = x @ weight.mT
    return out if bias is None else out + bias


def embedding(idx, weight):
    """Rows of `weight` at the integer tensor `idx`: shape idx.shape + (embedding_dim,). An index outside
    [0, num_embeddings) raises IndexError, as in PyTorch (when its value is on the host)."""
    return embedding_rows(weight, idx)


def gelu(x, approximate="none"):
    """0.5 * x * (1 + erf(x / sqrt(2))) (exact); approximate="tanh" uses the tanh formula. Backward keeps
    x alone and makes the formula's values again (lazytensor/recompute.py)."""
    if approximate == "tanh":
        return recomputed("gelu", _gelu_tanh, x)
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return recomputed("gelu", _gelu_erf, x, gradient=_gelu_erf_gradient)


def _gelu_erf(x):
    return 0.5 * x * (1.0 + (x * _INV_SQRT2).erf())


def _gelu_erf_gradient(g, x):
    """g * (cdf(x) + x * pdf(x)), PyTorch's formula: one expression of g and x (one fused kernel)."""
    return (g * (0.5 * (1.0 + (x * _INV_SQRT2).erf()) + x * ((x * x * -0.5).exp() * _INV_SQRT_2PI)),)


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + ((x + 0.044715 * x * x * x) * math.sqrt(2.0 / math.pi)).tanh())


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) over the trailing `normalized_shape` dims (biased variance), then
    * weight + bias. The normalization is one node (definition: kernels/reference/layer_norm.py); with a
    weight, backward keeps x and normalizes it again for the weight's gradient (lazytensor/recompute.py)
    instead of keeping the normalized value."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if _amp._REGIONS:  # autocast on CUDA keeps normalizations in float32
        x, weight, bias = _amp.widen(x, weight, bias, kind="norm")
    if x.shape[x.ndim - len(shape):] != shape:
        raise ValueError(f"layer_norm: input of shape {x.shape} does not end in normalized_shape {shape}")
    if not x.dtype.is_floating_point:
        x = x.float()
    axes, eps = tuple(range(x.ndim - len(shape), x.ndim)), float(eps)
    if weight is None:
        out = _normalized(x, axes=axes, eps=eps, scaled=False)
        return out if bias is None else out + bias
    affine = (weight,) if bias is None else (weight, bias)
    return recomputed("layer_norm", _normalized, x, *affine, axes=axes, eps=eps, scaled=True)


def _normalized(x, *affine, axes, eps, scaled):
    """layer_norm's node, times the first of `affine` if `scaled`, plus the next one if any."""
    out = Tensor._from_op("layer_norm", (x,), {"axes": axes, "eps": eps, "dtype": x.dtype.np}, x.shape, x.dtype)
    if scaled:
        out = out * affine[0]
        affine = affine[1:]
    return out + affine[0] if affine else out


def dropout(x, p=0.5, training=True, inplace=False):
    """Zero elements with probability p (mask from the seeded generator) and scale the rest by 1/(1-p)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    mask = bernoulli_mask(x.shape, 1.0 - p, x.dtype)
    return x * mask * (1.0 / (1.0 - p))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """PyTorch's F.cross_entropy: log_softmax over the class axis (1, or the only one), then nll_loss with
    the same weight, ignore_index and reduction. Float targets of the input's shape are class
    probabilities; `label_smoothing` mixes the targets with the uniform distribution."""
    class_dim = 0 if input.ndim == 1 else 1
    if _amp._REGIONS:  # autocast keeps losses in float32
        (input,) = _amp.widen(input)
    logp = log_softmax(input, dim=class_dim)
    if target.dtype.is_floating_point:
        if target.shape != input.shape:
            raise ValueError(f"cross_entropy: probability targets must have the input's shape {input.shape}, "
                             f"got {target.shape}")
        C = input.shape[class_dim]
        if label_smoothing:
            target = target * (1.0 - label_smoothing) + label_smoothing / C
        per = logp if weight is None else logp * weight.reshape((C,) + (1,) * (input.ndim - class_dim - 1))
        losses = -(per * target).sum(dim=class_dim)
        return losses.mean() if reduction == "mean" else _losses.reduced(losses, reduction, "cross_entropy")
    nll = nll_loss(logp, target, weight, size_average, ignore_index, reduce, reduction)
    if not label_smoothing:
        return nll
    if weight is not None:
        raise NotImplementedError("cross_entropy: label_smoothing together with weight is not supported")
    keep = (target != ignore_index).to(input.dtype)
    smooth = -logp.mean(dim=class_dim) * keep
    if reduction == "mean":
        smooth = smooth.sum() / keep.sum()
    else:
        smooth = _losses.reduced(smooth, reduction, "cross_entropy")
    return nll * (1.0 - label_smoothing) + smooth * label_smoothing


_CAUSAL = {}


def future_mask(L, S):
    """(L, S) bool, True above the diagonal (the positions causal attention hides). Built once per size
    and reused, so after its first upload it stays resident on the device."""
    key = (L, S)
    if key not in _CAUSAL:
        if len(_CAUSAL) >= 16:
            _CAUSAL.pop(next(iter(_CAUSAL)))
        _CAUSAL[key] = ones(L, S, dtype=dtypes.bool_).triu(1).realize()
    return _CAUSAL[key]


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 training=True):
    """softmax(q @ k^T * scale + mask) @ v over the last two dims; is_causal masks future positions."""
    L, S = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.mT) * scale
    if is_causal:
        scores = scores.masked_fill(future_mask(L, S), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == dtypes.bool_:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = softmax(scores, dim=-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training)
    return weights @ v


def relu(x, inplace=False):
    """max(x, 0); `inplace` is accepted (the result is a new value either way)."""
    return x.relu()


def sigmoid(x):
    return x.sigmoid()


def tanh(x):
    return x.tanh()


def silu(x, inplace=False):
    """x * sigmoid(x) (swish)."""
    return x * x.sigmoid()


def one_hot(x, num_classes=-1):
    """int64 indicators: out[..., c] = 1 where x == c. Like PyTorch it reads x on the host to check the
    classes (and to find their number when num_classes is -1); IndexError for one out of range."""
    if x.dtype.is_floating_point or x.dtype == dtypes.bool_:
        raise TypeError(f"one_hot: class values must be an integer tensor, got {x.dtype}")
    if x.numel():
        lo, hi = int(x.min()), int(x.max())
        if lo < 0 or (num_classes != -1 and hi >= num_classes):
            raise IndexError(f"one_hot: class values must be in [0, {num_classes}), got {lo if lo < 0 else hi}")
        num_classes = hi + 1 if num_classes == -1 else num_classes
    elif num_classes == -1:
        raise ValueError("one_hot: cannot infer num_classes from an empty tensor; pass it")
    return (x.unsqueeze(-1) == arange(num_classes)).to(dtypes.int64)


def normalize(x, p=2.0, dim=1, eps=1e-12):
    """x / max(||x||_p along dim, eps)."""
    if p == 2.0:
        norm = (x * x).sum(dim=dim, keepdim=True).sqrt()
    else:
        norm = (x.abs() ** p).sum(dim=dim, keepdim=True) ** (1.0 / p)
    return x / norm.clip(min=eps)


__all__ = ["linear", "embedding", "gelu", "layer_norm", "dropout", "cross_entropy", "softmax", "log_softmax",
           "scaled_dot_product_attention", "relu", "sigmoid", "tanh", "silu", "softplus", "one_hot", "normalize",
           "pad", "mse_loss", "nll_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "conv1d", "conv2d", "conv3d", "max_pool1d", "max_pool2d", "max_pool3d",
           "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
           "adaptive_max_pool2d", "celu", "elu", "glu",
           "hardsigmoid", "hardswish", "hardtanh", "leaky_relu", "logsigmoid", "mish", "relu6", "selu", "softmin",
           "softsign", "tanhshrink", "threshold", "batch_norm", "group_norm", "instance_norm", "dropout1d",
           "dropout2d", "dropout3d", "interpolate",
           "pixel_shuffle", "pixel_unshuffle", "conv_transpose1d", "conv_transpose2d", "Tensor"]


def pad(x, pad, mode="constant", value=0.0):  # noqa: A002  (PyTorch's names)
    """PyTorch's F.pad: `pad` gives (before, after) pairs from the last dim backwards; constant mode fills
    with `value` (a negative amount removes entries instead), reflect, replicate and circular take the
    input's own entries (lazytensor/nn/vision.py)."""
    if mode in ("reflect", "replicate", "circular"):
        return pad_by_index(x, pad, mode)
    if mode != "constant":
        raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ValueError(f"pad: expected (before, after) pairs for at most {x.ndim} dims, got {tuple(pad)}")
    out = x
    for i in range(len(pad) // 2):
        d = x.ndim - 1 - i
        before, after = int(pad[2 * i]), int(pad[2 * i + 1])
        if before < 0 or after < 0:
            n = out.shape[d]
            start, stop = max(0, -before), n - max(0, -after)
            if stop < start:
                raise ValueError(f"pad: removing {-before} and {-after} entries leaves nothing of dim {d} (size {n})")
            out = out.narrow(d, start, stop - start)
            before, after = max(0, before), max(0, after)
        pieces = []
        for amount in (before, None, after):
            if amount is None:
                pieces.append(out)
            elif amount:
                shape = list(out.shape)
                shape[d] = amount
                pieces.append(full(tuple(shape), value, dtype=out.dtype))
        out = cat(pieces, dim=d) if len(pieces) > 1 else out
    return out
