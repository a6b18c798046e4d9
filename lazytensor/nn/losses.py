"""Losses in PyTorch's shape (reduction="mean" | "sum" | "none"), built from differentiable ops."""
from .. import amp as _amp, dtypes
from ..elementwise import where


def _float32_in_autocast(input, target):
    """Autocast keeps losses in float32 (PyTorch's rule): low-precision operands widened inside a region."""
    return _amp.widen(input, target) if _amp._REGIONS else (input, target)


def reduced(losses, reduction, name):
    """`losses` reduced as `reduction` says ("mean", "sum" or "none")."""
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    if reduction == "none":
        return losses
    raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _same_shape(name, input, target):
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"{name}: input {input.shape} and target {target.shape} must have the same shape "
                         f"(broadcasting them silently is a common bug; expand one explicitly)")


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """(input - target)^2, reduced."""
    input, target = _float32_in_autocast(input, target)
    _same_shape("mse_loss", input, target)
    diff = input - target
    return reduced(diff * diff, legacy_reduction(size_average, reduce, reduction), "mse_loss")


def _classes_last(input, target, name):
    """(N*d.., C) scores and (N*d..,) targets from PyTorch's (N, C, d1, ...) and (N, d1, ...) layouts
    (or an unbatched (C,) and ()); ValueError for shapes that do not pair."""
    if input.ndim == 1 and target.ndim == 0:
        return input.unsqueeze(0), target.reshape(1)
    if input.ndim < 2 or target.shape != input.shape[:1] + input.shape[2:]:
        raise ValueError(f"{name}: expected input (N, C) or (N, C, d1, ...) and target (N,) or (N, d1, ...), "
                         f"got {input.shape} and {target.shape}")
    if target.dtype.is_floating_point or target.dtype == dtypes.bool_:
        raise TypeError(f"{name}: targets must be integer class indices, got {target.dtype}")
    if input.ndim > 2:
        C = input.shape[1]
        input = input.permute(0, *range(2, input.ndim), 1).reshape(-1, C)
        target = target.reshape(-1)
    return input, target


def legacy_reduction(size_average, reduce, reduction):
    """PyTorch's deprecated size_average/reduce arguments as a reduction."""
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-weight[t] * input[n, t] for log-probabilities (N, C) (or (N, C, d1, ...)) and class targets t; rows
    whose target is `ignore_index` count for nothing; the mean divides by the kept rows' total weight."""
    if _amp._REGIONS:  # autocast keeps losses in float32
        (input,) = _amp.widen(input)
    reduction = legacy_reduction(size_average, reduce, reduction)
    shape = target.shape
    input, target = _classes_last(input, target, "nll_loss")
    keep = target != ignore_index
    safe = target.where(keep, 0)
    picked = input.gather(1, safe.unsqueeze(1)).squeeze(1)
    w = keep.to(input.dtype)
    if weight is not None:
        if weight.shape != (input.shape[1],):
            raise ValueError(f"nll_loss: weight must have one entry per class ({input.shape[1]}), got {weight.shape}")
        w = w * weight.to(input.dtype)[safe]
    losses = -(picked * w)
    if reduction == "mean":
        return losses.sum() / w.sum()
    if reduction == "none":
        return losses.reshape(shape)
    return reduced(losses, reduction, "nll_loss")


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """|input - target|, reduced."""
    input, target = _float32_in_autocast(input, target)
    _same_shape("l1_loss", input, target)
    return reduced((input - target).abs(), legacy_reduction(size_average, reduce, reduction), "l1_loss")


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target); beta 0 is the L1 loss."""
    input, target = _float32_in_autocast(input, target)
    _same_shape("smooth_l1_loss", input, target)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    d = (input - target).abs()
    losses = d if beta == 0 else where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return reduced(losses, legacy_reduction(size_average, reduce, reduction), "smooth_l1_loss")


def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta): smooth_l1_loss times delta."""
    input, target = _float32_in_autocast(input, target)
    _same_shape("huber_loss", input, target)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    d = (input - target).abs()
    return reduced(where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction, "huber_loss")


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target * (log target - input) for log-probabilities `input` (0 where target is 0); reduction
    "batchmean" divides the sum by the batch size, as PyTorch recommends."""
    if log_target:
        losses = target.exp() * (target - input)
    else:
        losses = where(target > 0, target * (target.clip(min=1e-45).log() - input), 0.0)
    reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction == "batchmean":
        return losses.sum() / input.shape[0]
    return reduced(losses, reduction, "kl_div")


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """-(t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x))), computed stably as
    max(x, 0) - x * t + log1p(exp(-|x|))."""
    input, target = _float32_in_autocast(input, target)
    _same_shape("binary_cross_entropy_with_logits", input, target)
    if pos_weight is None:
        losses = input.relu() - input * target + (-input.abs()).exp().log1p()
    else:  # (1 - t) x + (1 + (pw - 1) t) softplus(-x)
        softplus_neg = (-input).relu() + (-input.abs()).exp().log1p()
        losses = (1.0 - target) * input + (1.0 + (pos_weight - 1.0) * target) * softplus_neg
    if weight is not None:
        losses = losses * weight
    return reduced(losses, legacy_reduction(size_average, reduce, reduction), "binary_cross_entropy_with_logits")


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(t * log(p) + (1 - t) * log(1 - p)) for probabilities p, each log clamped at -100 as PyTorch does."""
    input, target = _float32_in_autocast(input, target)
    _same_shape("binary_cross_entropy", input, target)
    log_p = input.log().clip(min=-100.0)
    log_q = (1.0 - input).log().clip(min=-100.0)
    losses = -(target * log_p + (1.0 - target) * log_q)
    if weight is not None:
        losses = losses * weight
    return reduced(losses, legacy_reduction(size_average, reduce, reduction), "binary_cross_entropy")
