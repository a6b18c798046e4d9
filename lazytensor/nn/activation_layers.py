"""Activation modules in PyTorch's shape (each calls its functional form), plus Identity, Flatten and
Unflatten. `inplace=` is accepted where PyTorch has it; the result is a new value either way."""
from .. import grad_mode
from ..activations import log_softmax, softmax
from ..creation import full
from ..elementwise import where
from . import activation_functions as A
from . import functional as F
from .module import Module, Parameter


def _simple(name, fn, doc, **params):
    """A module with no parameters whose forward is fn(x, **its constructor arguments)."""
    names = list(params)

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        values = dict(params)
        for key, value in zip(names, args):
            values[key] = value
        unknown = set(kwargs) - set(names)
        if unknown or len(args) > len(names):
            raise TypeError(f"{name}() takes {', '.join(names) or 'no arguments'}; got {sorted(unknown) or args}")
        values.update(kwargs)
        for key, value in values.items():
            object.__setattr__(self, key, value)

    def forward(self, x):
        return fn(x, **{k: getattr(self, k) for k in names if k != "inplace"})

    def extra_repr(self):
        return ", ".join(f"{k}={getattr(self, k)}" for k in names if k != "inplace")
    return type(name, (Module,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr,
                                  "__doc__": doc, "__module__": __name__})


ReLU = _simple("ReLU", lambda x: x.relu(), "max(x, 0).", inplace=False)
ReLU6 = _simple("ReLU6", A.relu6, "min(max(x, 0), 6).", inplace=False)
LeakyReLU = _simple("LeakyReLU", A.leaky_relu, "x where positive, negative_slope * x elsewhere.",
                    negative_slope=0.01, inplace=False)
ELU = _simple("ELU", A.elu, "x where positive, alpha * (exp(x) - 1) elsewhere.", alpha=1.0, inplace=False)
CELU = _simple("CELU", A.celu, "x where positive, alpha * (exp(x / alpha) - 1) elsewhere.", alpha=1.0,
               inplace=False)
SELU = _simple("SELU", A.selu, "scale * elu(x, alpha) with the self-normalizing constants.", inplace=False)
GELU = _simple("GELU", F.gelu, "The GELU: exact (erf) or approximate='tanh'.", approximate="none")
SiLU = _simple("SiLU", F.silu, "x * sigmoid(x).", inplace=False)
Mish = _simple("Mish", A.mish, "x * tanh(softplus(x)).", inplace=False)
Sigmoid = _simple("Sigmoid", lambda x: x.sigmoid(), "1 / (1 + exp(-x)).")
Tanh = _simple("Tanh", lambda x: x.tanh(), "tanh(x).")
Softplus = _simple("Softplus", F.softplus, "log(1 + exp(beta x)) / beta (x above the threshold).", beta=1.0,
                   threshold=20.0)
Softsign = _simple("Softsign", A.softsign, "x / (1 + |x|).")
Tanhshrink = _simple("Tanhshrink", A.tanhshrink, "x - tanh(x).")
LogSigmoid = _simple("LogSigmoid", A.logsigmoid, "log(sigmoid(x)), computed stably.")
Hardtanh = _simple("Hardtanh", A.hardtanh, "x clamped to [min_val, max_val].", min_val=-1.0, max_val=1.0,
                   inplace=False)
Hardsigmoid = _simple("Hardsigmoid", A.hardsigmoid, "clamp(x / 6 + 1/2, 0, 1).", inplace=False)
Hardswish = _simple("Hardswish", A.hardswish, "x * clamp(x + 3, 0, 6) / 6.", inplace=False)
Threshold = _simple("Threshold", A.threshold, "x where above threshold, else value.", threshold=0.0, value=0.0,
                    inplace=False)
GLU = _simple("GLU", A.glu, "a * sigmoid(b) for the halves a, b of x along dim.", dim=-1)
Softmax = _simple("Softmax", softmax, "softmax along dim.", dim=None)
LogSoftmax = _simple("LogSoftmax", log_softmax, "log_softmax along dim.", dim=None)
Softmin = _simple("Softmin", A.softmin, "softmax of -x along dim.", dim=None)


class PReLU(Module):
    """x where positive, a * x elsewhere, with a learned slope `a` (one, or one per channel, axis 1)."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        with grad_mode.no_grad():
            self.weight = Parameter(full((num_parameters,), float(init)))
        self._factory(device, dtype)

    def forward(self, x):
        w = self.weight
        if self.num_parameters > 1:
            w = w.reshape((-1,) + (1,) * (x.ndim - 2))
        return where(x > 0, x, x * w)


class Identity(Module):
    """Returns its input (any arguments to the constructor are ignored, as in PyTorch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Flatten(Module):
    """Flattens dims start_dim..end_dim into one (from 1: the batch axis stays)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dim `dim` into `unflattened_size`."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        d = self.dim % x.ndim
        return x.reshape(x.shape[:d] + self.unflattened_size + x.shape[d + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
