"""Recurrent layers in PyTorch's shape: RNN, LSTM, GRU (layers, batch_first, dropout between layers,
bidirectional, initial states) and their cells. Built from the existing ops, so they are lazy, fused
and replayable; parameter names, shapes, gate order and initialization law are PyTorch's, so a state
dict moves between the two unchanged."""
import math

from .. import grad_mode
from ..creation import zeros
from ..random import uniform
from ..shape_ops import cat, stack
from ..tensor import Tensor
from . import functional as F
from .module import Module, Parameter

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _uniform_parameter(shape, bound):
    return Parameter(uniform(*shape, low=-bound, high=bound))


def _cell_step(mode, x_part, h, c, w_hh, b_hh):
    """One time step from the input's share of the gates `x_part` (x W_ih^T + b_ih): (h', c')."""
    hh = h @ w_hh.mT
    if b_hh is not None:
        hh = hh + b_hh
    if mode == "LSTM":
        i, f, g, o = (x_part + hh).chunk(4, -1)
        c = f.sigmoid() * c + i.sigmoid() * g.tanh()
        return o.sigmoid() * c.tanh(), c
    if mode == "GRU":
        xr, xz, xn = x_part.chunk(3, -1)
        hr, hz, hn = hh.chunk(3, -1)
        r, z = (xr + hr).sigmoid(), (xz + hz).sigmoid()
        n = (xn + r * hn).tanh()
        return (1.0 - z) * n + z * h, None
    pre = x_part + hh
    return (pre.tanh() if mode == "RNN_TANH" else pre.relu()), None


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if proj_size:
            raise NotImplementedError(f"{type(self).__name__}: proj_size is not supported")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{type(self).__name__}: dropout must be in [0, 1], got {dropout}")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError(f"{type(self).__name__}: hidden_size and num_layers must be positive")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional = float(dropout), bidirectional
        gates = _GATES[mode] * hidden_size
        bound = 1.0 / math.sqrt(hidden_size)
        directions = 2 if bidirectional else 1
        with grad_mode.no_grad():
            for layer in range(num_layers):
                width = input_size if layer == 0 else hidden_size * directions
                for suffix in ("", "_reverse")[:directions]:
                    setattr(self, f"weight_ih_l{layer}{suffix}", _uniform_parameter((gates, width), bound))
                    setattr(self, f"weight_hh_l{layer}{suffix}", _uniform_parameter((gates, hidden_size), bound))
                    if bias:
                        setattr(self, f"bias_ih_l{layer}{suffix}", _uniform_parameter((gates,), bound))
                        setattr(self, f"bias_hh_l{layer}{suffix}", _uniform_parameter((gates,), bound))
        self._factory(device, dtype)

    def _weights(self, layer, suffix):
        get = self._parameters.get
        return (get(f"weight_ih_l{layer}{suffix}"), get(f"weight_hh_l{layer}{suffix}"),
                get(f"bias_ih_l{layer}{suffix}"), get(f"bias_hh_l{layer}{suffix}"))

    def forward(self, input, hx=None):
        """(output, h_n) — for LSTM (output, (h_n, c_n)) — with PyTorch's layouts: input (L, N, H_in),
        (N, L, H_in) with batch_first, or unbatched (L, H_in); states (layers * directions, N, H)."""
        unbatched = input.ndim == 2
        if input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: expected a 2-D or 3-D input, got shape {input.shape}")
        if input.shape[-1] != self.input_size:
            raise ValueError(f"{type(self).__name__}: input has {input.shape[-1]} features, the layer "
                             f"expects input_size={self.input_size}")
        x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if self.batch_first else input)
        L, N = x.shape[:2]
        directions = 2 if self.bidirectional else 1
        lstm = self.mode == "LSTM"
        h0 = c0 = None
        if L == 0:
            raise ValueError(f"{type(self).__name__}: the input sequence is empty (length 0); PyTorch needs at "
                             f"least one step too")
        if hx is not None:
            if lstm and not (isinstance(hx, (tuple, list)) and len(hx) == 2):
                got = f"{type(hx).__name__} of length {len(hx)}" if isinstance(hx, (tuple, list)) else \
                    type(hx).__name__
                raise TypeError(f"LSTM: hx must be a tuple (h_0, c_0) of two tensors, got a {got}")
            if not lstm and not isinstance(hx, Tensor):
                raise TypeError(f"{type(self).__name__}: hx must be a tensor h_0, got {type(hx).__name__}")
            h0, c0 = hx if lstm else (hx, None)
            if unbatched:
                h0 = h0.unsqueeze(1)
                c0 = c0.unsqueeze(1) if c0 is not None else None
            expected = (self.num_layers * directions, N, self.hidden_size)
            if h0.shape != expected or (c0 is not None and c0.shape != expected):
                raise ValueError(f"{type(self).__name__}: initial state of shape {h0.shape}, expected {expected}")
        zero = None
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(("", "_reverse")[:directions]):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, suffix)
                k = layer * directions + d
                if h0 is not None:
                    h, c = h0[k], (c0[k] if lstm else None)
                else:
                    zero = zero if zero is not None else zeros(N, self.hidden_size, dtype=x.dtype)
                    h, c = zero, (zero if lstm else None)
                x_parts = F.linear(x, w_ih, b_ih)  # every step's input share in one product
                steps = range(L - 1, -1, -1) if d else range(L)
                ys = [None] * L
                for t in steps:
                    h, c = _cell_step(self.mode, x_parts[t], h, c, w_hh, b_hh)
                    ys[t] = h
                outs.append(stack(ys, 0))
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if directions == 1 else cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        out = x.squeeze(1) if unbatched else (x.transpose(0, 1) if self.batch_first else x)
        h_n = stack(h_n, 0)
        h_n = h_n.squeeze(1) if unbatched else h_n
        if lstm:
            c_n = stack(c_n, 0)
            return out, (h_n, c_n.squeeze(1) if unbatched else c_n)
        return out, h_n

    def flatten_parameters(self):
        """PyTorch's cuDNN layout call: nothing to do here."""

    def extra_repr(self):
        extra = "" if self.num_layers == 1 else f", num_layers={self.num_layers}"
        extra += ", batch_first=True" if self.batch_first else ""
        extra += f", dropout={self.dropout}" if self.dropout else ""
        extra += ", bidirectional=True" if self.bidirectional else ""
        return f"{self.input_size}, {self.hidden_size}{extra}"


class RNN(RNNBase):
    """Elman RNN: h' = tanh (or relu) of x W_ih^T + b_ih + h W_hh^T + b_hh."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """LSTM with PyTorch's gate order (input, forget, cell, output)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    """GRU with PyTorch's gate order (reset, update, new) and n = tanh(x_n + r * (h W_hn^T + b_hn))."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)


class RNNCellBase(Module):
    def __init__(self, mode, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        self.mode, self.input_size, self.hidden_size, self.bias = mode, input_size, hidden_size, bias
        gates = _GATES[mode] * hidden_size
        bound = 1.0 / math.sqrt(hidden_size)
        with grad_mode.no_grad():
            self.weight_ih = _uniform_parameter((gates, input_size), bound)
            self.weight_hh = _uniform_parameter((gates, hidden_size), bound)
            self.bias_ih = _uniform_parameter((gates,), bound) if bias else None
            self.bias_hh = _uniform_parameter((gates,), bound) if bias else None
        self._factory(device, dtype)

    def _step(self, input, h, c):
        unbatched = input.ndim == 1
        if unbatched:
            input = input.unsqueeze(0)
            h = h.unsqueeze(0) if h is not None else None
            c = c.unsqueeze(0) if c is not None else None
        if input.shape[-1] != self.input_size:
            raise ValueError(f"{type(self).__name__}: input has {input.shape[-1]} features, the cell expects "
                             f"input_size={self.input_size}")
        if h is None:
            h = zeros(input.shape[0], self.hidden_size, dtype=input.dtype)
        if c is None and self.mode == "LSTM":
            c = zeros(input.shape[0], self.hidden_size, dtype=input.dtype)
        h, c = _cell_step(self.mode, F.linear(input, self.weight_ih, self.bias_ih), h, c, self.weight_hh,
                          self.bias_hh)
        if unbatched:
            h, c = h.squeeze(0), (c.squeeze(0) if c is not None else None)
        return h, c

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, bias,
                         device, dtype)

    def forward(self, input, hx=None):
        return self._step(input, hx, None)[0]


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):
        """(h', c') from input and (h, c) (zeros when None)."""
        h, c = (None, None) if hx is None else hx
        return self._step(input, h, c)


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):
        return self._step(input, hx, None)[0]
