"""Losses in PyTorch's shape (reduction="mean" | "sum" | "none"), built from differentiable ops."""
from .. import dtypes


def _reduce(losses, reduction, name):
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


def mse_loss(input, target, reduction="mean"):
    """(input - target)^2, reduced."""
    _same_shape("mse_loss", input, target)
    diff = input - target
    return _reduce(diff * diff, reduction, "mse_loss")


def nll_loss(input, target, ignore_index=-100, reduction="mean"):
    """-input[n, target[n]] for (N, C) log-probabilities; rows whose target is `ignore_index` count for
    nothing (the mean is over the others)."""
    if input.ndim != 2 or target.ndim != 1 or target.shape[0] != input.shape[0]:
        raise ValueError(f"nll_loss: expected input (N, C) and target (N,), got {input.shape} and {target.shape}")
    if target.dtype.is_floating_point or target.dtype == dtypes.bool_:
        raise TypeError(f"nll_loss: targets must be integer class indices, got {target.dtype}")
    keep = target != ignore_index
    picked = input.gather(1, target.where(keep, 0).unsqueeze(1)).squeeze(1)
    losses = -(picked * keep.to(input.dtype))
    if reduction == "mean":
        return losses.sum() / keep.sum().to(input.dtype)
    return _reduce(losses, reduction, "nll_loss")


def binary_cross_entropy_with_logits(input, target, reduction="mean"):
    """-(t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x))), computed stably as
    max(x, 0) - x * t + log1p(exp(-|x|))."""
    _same_shape("binary_cross_entropy_with_logits", input, target)
    losses = input.relu() - input * target + (-input.abs()).exp().log1p()
    return _reduce(losses, reduction, "binary_cross_entropy_with_logits")


def binary_cross_entropy(input, target, reduction="mean"):
    """-(t * log(p) + (1 - t) * log(1 - p)) for probabilities p, each log clamped at -100 as PyTorch does."""
    _same_shape("binary_cross_entropy", input, target)
    log_p = input.log().clip(min=-100.0)
    log_q = (1.0 - input).log().clip(min=-100.0)
    return _reduce(-(target * log_p + (1.0 - target) * log_q), reduction, "binary_cross_entropy")
