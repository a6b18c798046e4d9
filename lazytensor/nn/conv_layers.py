"""Convolution and pooling modules in PyTorch's shape (parameter names, shapes and initialization law:
kaiming-uniform weights with a = sqrt(5), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)))."""
import math

from .. import grad_mode
from ..random import uniform
from . import windows as W
from .module import Module, Parameter


class _ConvNd(Module):
    def __init__(self, n, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                 padding_mode, device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise NotImplementedError(f"Conv{n}d: padding_mode={padding_mode!r}; only 'zeros' is supported")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv{n}d: in_channels {in_channels} and out_channels {out_channels} must be "
                             f"divisible by groups={groups}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = W.pair(kernel_size, "kernel_size", n)
        self.stride, self.dilation = W.pair(stride, "stride", n), W.pair(dilation, "dilation", n)
        self.padding = padding if isinstance(padding, str) else W.pair(padding, "padding", n)
        fan_in = in_channels // groups * math.prod(self.kernel_size)
        bound = 1.0 / math.sqrt(fan_in) if fan_in else 0.0  # kaiming_uniform_(a=sqrt(5)) gives this bound
        with grad_mode.no_grad():
            self.weight = Parameter(uniform(out_channels, in_channels // groups, *self.kernel_size, low=-bound,
                                            high=bound))
            self.bias = Parameter(uniform(out_channels, low=-bound, high=bound)) if bias else None
        self._factory(device, dtype)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
                + (f", padding={self.padding}" if self.padding not in ((0,), (0, 0), (0, 0, 0)) else "")
                + (f", groups={self.groups}" if self.groups != 1 else "")
                + (", bias=False" if self.bias is None else ""))


class Conv1d(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(1, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)

    def forward(self, x):
        return W.conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv2d(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(2, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)

    def forward(self, x):
        return W.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv3d(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(3, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)

    def forward(self, x):
        return W.conv3d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class _ConvTransposeNd(Module):
    """PyTorch's ConvTranspose modules: weight (in, out/groups, *kernel), kaiming-uniform from the fan-in
    PyTorch computes for it (out/groups times the kernel size), bias the same bound."""

    def __init__(self, n, in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias,
                 dilation, padding_mode, device, dtype):
        super().__init__()
        name = f"ConvTranspose{n}d"
        if padding_mode != "zeros":
            raise NotImplementedError(f"{name}: padding_mode={padding_mode!r}; only 'zeros' is supported")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels {in_channels} and out_channels {out_channels} must be "
                             f"divisible by groups={groups}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = W.pair(kernel_size, "kernel_size", n)
        self.stride, self.padding = W.pair(stride, "stride", n), W.pair(padding, "padding", n)
        self.output_padding = W.pair(output_padding, "output_padding", n)
        self.dilation = W.pair(dilation, "dilation", n)
        fan_in = out_channels // groups * math.prod(self.kernel_size)
        bound = 1.0 / math.sqrt(fan_in) if fan_in else 0.0
        with grad_mode.no_grad():
            self.weight = Parameter(uniform(in_channels, out_channels // groups, *self.kernel_size, low=-bound,
                                            high=bound))
            self.bias = Parameter(uniform(out_channels, low=-bound, high=bound)) if bias else None
        self._factory(device, dtype)

    def _check_output_size(self, output_size):
        if output_size is not None:
            raise NotImplementedError(f"{type(self).__name__}: output_size is not supported; give output_padding")

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
                + (", bias=False" if self.bias is None else ""))


class ConvTranspose1d(_ConvTransposeNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(1, in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias,
                         dilation, padding_mode, device, dtype)

    def forward(self, x, output_size=None):
        self._check_output_size(output_size)
        return W.conv_transpose1d(x, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                  self.groups, self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(2, in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias,
                         dilation, padding_mode, device, dtype)

    def forward(self, x, output_size=None):
        self._check_output_size(output_size)
        return W.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                  self.groups, self.dilation)


def _pool(name, fn, doc, **defaults):
    names = list(defaults)

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        values = dict(defaults)
        values.update(zip(names, args))
        unknown = set(kwargs) - set(names)
        if unknown:
            raise TypeError(f"{name}: unexpected arguments {sorted(unknown)}")
        values.update(kwargs)
        for k, v in values.items():
            object.__setattr__(self, k, v)

    def forward(self, x):
        return fn(x, **{k: getattr(self, k) for k in names})

    def extra_repr(self):
        return ", ".join(f"{k}={getattr(self, k)}" for k in names)
    return type(name, (Module,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr, "__doc__": doc,
                                  "__module__": __name__})


MaxPool1d = _pool("MaxPool1d", W.max_pool1d, "Maxima of windows along the last axis.", kernel_size=None,
                  stride=None, padding=0, dilation=1)
MaxPool2d = _pool("MaxPool2d", W.max_pool2d, "Maxima of 2-D windows.", kernel_size=None, stride=None, padding=0,
                  dilation=1, ceil_mode=False, return_indices=False)
MaxPool3d = _pool("MaxPool3d", W.max_pool3d, "Maxima of 3-D windows.", kernel_size=None, stride=None, padding=0,
                  dilation=1, ceil_mode=False, return_indices=False)
AvgPool1d = _pool("AvgPool1d", W.avg_pool1d, "Means of windows along the last axis.", kernel_size=None,
                  stride=None, padding=0)
AvgPool2d = _pool("AvgPool2d", W.avg_pool2d, "Means of 2-D windows.", kernel_size=None, stride=None, padding=0,
                  ceil_mode=False, count_include_pad=True, divisor_override=None)
AvgPool3d = _pool("AvgPool3d", W.avg_pool3d, "Means of 3-D windows.", kernel_size=None, stride=None, padding=0,
                  ceil_mode=False, count_include_pad=True, divisor_override=None)
AdaptiveAvgPool1d = _pool("AdaptiveAvgPool1d", W.adaptive_avg_pool1d, "Means over adaptive windows.",
                          output_size=None)
AdaptiveAvgPool2d = _pool("AdaptiveAvgPool2d", W.adaptive_avg_pool2d, "Means over adaptive 2-D windows.",
                          output_size=None)
AdaptiveMaxPool2d = _pool("AdaptiveMaxPool2d", W.adaptive_max_pool2d, "Maxima over adaptive 2-D windows.",
                          output_size=None)
