"""Batch, group and instance normalization in PyTorch's shape: `F.batch_norm`, `F.group_norm`,
`F.instance_norm` and the modules BatchNorm1d/2d/3d, GroupNorm, InstanceNorm1d/2d/3d.

Statistics are a mean and a biased variance over every axis but the channel one (1); training updates
the running statistics in place (the same tensors, so `lt.jit` replays update them too) with PyTorch's
momentum rule: running = (1 - momentum) * running + momentum * batch statistic, the variance's unbiased,
and `momentum=None` a cumulative average over `num_batches_tracked`.
"""
from .. import amp as _amp, dtypes, grad_mode
from ..creation import ones, tensor, zeros
from .module import Module, Parameter


def _channel_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _normalize(x, axes, eps):
    mean = x.mean(dim=axes, keepdim=True)
    centered = x - mean
    var = (centered * centered).mean(dim=axes, keepdim=True)
    return centered * (var + eps).rsqrt(), mean, var


def _update_running(running_mean, running_var, mean, var, count, momentum):
    """running = (1 - momentum) running + momentum * batch value (the variance unbiased), in place."""
    with grad_mode.no_grad():
        unbiased = var * (count / max(count - 1, 1))
        for running, batch in ((running_mean, mean), (running_var, unbiased)):
            if running is not None:
                running.mul_(1.0 - momentum).add_(batch.detach().reshape(running.shape).to(running.dtype),
                                                  alpha=momentum)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
               eps=1e-5):
    """PyTorch's F.batch_norm over (N, C, ...) inputs: batch statistics when `training` (updating the running
    ones given, in place), else the running statistics."""
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input (N, C, ...), got shape {input.shape}")
    if _amp._REGIONS:  # autocast on CUDA keeps normalizations in float32
        input, weight, bias = _amp.widen(input, weight, bias, kind="norm")
    axes = (0,) + tuple(range(2, input.ndim))
    count = input.numel() // input.shape[1]
    if training:
        if count <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got input of "
                             f"shape {input.shape}")
        out, mean, var = _normalize(input, axes, float(eps))
        if running_mean is not None or running_var is not None:
            _update_running(running_mean, running_var, mean, var, count, momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: evaluation needs running_mean and running_var (or training=True)")
        shape = _channel_shape(input)
        out = (input - running_mean.reshape(shape)) * (running_var.reshape(shape) + float(eps)).rsqrt()
    return _affine(out, weight, bias)


def _affine(out, weight, bias):
    shape = _channel_shape(out)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """PyTorch's F.group_norm: the channels of (N, C, ...) in `num_groups` groups, each normalized over its
    channels and positions, then per-channel weight and bias."""
    N, C = input.shape[:2]
    if _amp._REGIONS:
        input, weight, bias = _amp.widen(input, weight, bias, kind="norm")
    if C % num_groups:
        raise ValueError(f"group_norm: {C} channels cannot be split into {num_groups} groups")
    grouped = input.reshape(N, num_groups, -1)
    out, _, _ = _normalize(grouped, (2,), float(eps))
    return _affine(out.reshape(input.shape), weight, bias)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """PyTorch's F.instance_norm: each (sample, channel) of (N, C, ...) normalized over its positions; the
    running statistics (if given) follow the batch's mean over samples."""
    axes = tuple(range(2, input.ndim))
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if not axes:
        raise ValueError(f"instance_norm: expected an input (N, C, ...) with positions, got shape {input.shape}")
    out, mean, var = _normalize(input, axes, float(eps))
    if running_mean is not None or running_var is not None:
        count = input.numel() // (input.shape[0] * input.shape[1])
        _update_running(running_mean, running_var, mean.mean(dim=0), var.mean(dim=0), count, momentum)
    return _affine(out, weight, bias)


class _NormBase(Module):
    """What BatchNorm and InstanceNorm share: an optional affine weight and bias per channel, optional
    running statistics (buffers running_mean, running_var, num_batches_tracked)."""

    _dims = None  # the input ranks accepted (with and without the batch axis)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = Parameter(ones(num_features)) if affine else None
        self.bias = Parameter(zeros(num_features)) if affine and bias else None
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features))
            self.register_buffer("running_var", ones(num_features))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=dtypes.int64))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None
        self._factory(device, dtype)

    def reset_running_stats(self):
        if self.track_running_stats:
            with grad_mode.no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def _check(self, x):
        name = type(self).__name__
        if x.ndim not in self._dims:
            raise ValueError(f"{name}: expected a {' or '.join(f'{d}-D' for d in self._dims)} input, got shape "
                             f"{x.shape}")
        unbatched = isinstance(self, _InstanceNorm) and x.ndim == min(self._dims)
        channels = x.shape[0] if unbatched else x.shape[1]
        if self.affine or self.track_running_stats:
            if channels != self.num_features:
                raise ValueError(f"{name}: input has {channels} channels, the layer expects {self.num_features}")

    def _momentum(self):
        """This step's momentum: `momentum`, or with momentum=None the cumulative average's 1 / batches."""
        if self.training and self.track_running_stats:
            if self.momentum is None and "_seen" not in self.__dict__:
                # counted on the host from here on: reading the buffer every step would be a host read
                object.__setattr__(self, "_seen", int(self.num_batches_tracked.item()))
            with grad_mode.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                object.__setattr__(self, "_seen", self._seen + 1)
                return 1.0 / self._seen
        return 0.0 if self.momentum is None else self.momentum

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                + f"bias={self.bias is not None}, "
                + f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    def forward(self, x):
        self._check(x)
        momentum = self._momentum()
        use_batch = self.training or not self.track_running_stats  # (running stats are None when not tracked)
        return batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_batch, momentum,
                          self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) inputs."""
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) inputs."""
    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization of (N, C, D, H, W) inputs."""
    _dims = (5,)


class _InstanceNorm(_NormBase):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, x):
        self._check(x)
        unbatched = x.ndim == min(self._dims)
        if unbatched:
            x = x.unsqueeze(0)
        momentum = 0.0 if self.momentum is None else self.momentum  # (PyTorch's: num_batches_tracked stays 0)
        use_batch = self.training or not self.track_running_stats
        out = instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_batch, momentum,
                            self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of (N, C, L) or (C, L) inputs."""
    _dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of (N, C, H, W) or (C, H, W) inputs."""
    _dims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of (N, C, D, H, W) or (C, D, H, W) inputs."""
    _dims = (4, 5)


class GroupNorm(Module):
    """Group normalization: `num_channels` in `num_groups` groups, per-channel weight and bias."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels {num_channels} must be divisible by num_groups {num_groups}")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        self.weight = Parameter(ones(num_channels)) if affine else None
        self.bias = Parameter(zeros(num_channels)) if affine and bias else None
        self._factory(device, dtype)

    def forward(self, x):
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm: expected (N, {self.num_channels}, ...), got shape {x.shape}")
        return group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"
                + f", bias={self.bias is not None}")


__all__ = ["batch_norm", "group_norm", "instance_norm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm",
           "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]
