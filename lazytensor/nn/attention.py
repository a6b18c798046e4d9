"""nn.MultiheadAttention in PyTorch's shape: the same parameters (names, shapes, initialization law),
arguments, masks and returned weights, so a state dict moves between the two frameworks unchanged."""
import math

from .. import dtypes, grad_mode
from ..creation import zeros
from ..random import uniform
from . import functional as F
from .layers import Linear
from .module import Module, Parameter


class MultiheadAttention(Module):
    """Attention over `num_heads` heads of size embed_dim / num_heads. Inputs are (L, N, E), or (N, L, E)
    with batch_first, or unbatched (L, E). A bool `attn_mask` or `key_padding_mask` marks with True the
    positions that may NOT be attended (PyTorch's convention here, the opposite of
    scaled_dot_product_attention's); a float mask is added to the scores."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim {embed_dim} must be divisible by num_heads {num_heads}")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are not supported")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim = embed_dim // num_heads
        self.kdim, self.vdim = kdim or embed_dim, vdim or embed_dim
        self.batch_first = batch_first
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        with grad_mode.no_grad():
            if self._qkv_same_embed_dim:
                self.in_proj_weight = Parameter(_xavier_uniform(3 * embed_dim, embed_dim))
                self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
            else:
                self.in_proj_weight = None
                self.q_proj_weight = Parameter(_xavier_uniform(embed_dim, embed_dim))
                self.k_proj_weight = Parameter(_xavier_uniform(embed_dim, self.kdim))
                self.v_proj_weight = Parameter(_xavier_uniform(embed_dim, self.vdim))
            self.in_proj_bias = Parameter(zeros(3 * embed_dim)) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        if bias:
            with grad_mode.no_grad():
                self.out_proj.bias = Parameter(zeros(embed_dim))
        self._factory(device, dtype)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        """(attn_output, attn_weights): the output in the query's layout, and the attention weights
        (N, L, S) averaged over heads (or (N, H, L, S)), None when need_weights is False."""
        if is_causal and attn_mask is None:
            raise RuntimeError("MultiheadAttention: is_causal is a hint that attn_mask is the causal mask; "
                               "pass attn_mask too (e.g. lt.ones(L, L, dtype=lt.bool).triu(1))")
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        L, N, E = query.shape
        S = key.shape[0]
        if E != self.embed_dim:
            raise ValueError(f"MultiheadAttention: query has embedding size {E}, expected {self.embed_dim}")
        q, k, v = self._project(query, key, value)
        H, D = self.num_heads, self.head_dim
        q = q.reshape(L, N * H, D).transpose(0, 1)  # (N*H, L, D), PyTorch's layout
        k = k.reshape(S, N * H, D).transpose(0, 1)
        v = v.reshape(S, N * H, D).transpose(0, 1)
        scores = (q * (1.0 / math.sqrt(D))) @ k.transpose(1, 2)
        scores = _masked(scores, attn_mask, (L, S), N * H, "attn_mask")
        if key_padding_mask is not None:
            if key_padding_mask.shape != (N, S):
                raise ValueError(f"MultiheadAttention: key_padding_mask must have shape {(N, S)}, "
                                 f"got {key_padding_mask.shape}")
            scores = _masked(scores.reshape(N, H, L, S), key_padding_mask.reshape(N, 1, 1, S), None, None,
                             "key_padding_mask").reshape(N * H, L, S)
        weights = F.softmax(scores, dim=-1)
        dropped = F.dropout(weights, self.dropout, self.training) if self.dropout > 0.0 else weights
        out = (dropped @ v).transpose(0, 1).reshape(L * N, E)
        out = self.out_proj(out).reshape(L, N, E)
        if unbatched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = weights.reshape(N, H, L, S)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        return out, (weights.squeeze(0) if unbatched else weights)

    def _project(self, query, key, value):
        E = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            wq, wk, wv = w[:E], w[E:2 * E], w[2 * E:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"


def _xavier_uniform(fan_out, fan_in):
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    return uniform(fan_out, fan_in, low=-bound, high=bound)


def _masked(scores, mask, shape2d, batch_heads, name):
    """Scores with a mask applied: bool True hides a position (-inf), a float mask is added. A 2-D
    mask of `shape2d` applies to every head; a 3-D one is (N*H, L, S)."""
    if mask is None:
        return scores
    if shape2d is not None and mask.shape not in (shape2d, (batch_heads,) + shape2d):
        raise ValueError(f"MultiheadAttention: {name} must have shape {shape2d} or {(batch_heads,) + shape2d}, "
                         f"got {mask.shape}")
    if mask.dtype == dtypes.bool_:
        return scores.masked_fill(mask, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise TypeError(f"MultiheadAttention: {name} must be bool or float, got {mask.dtype}")
    return scores + mask
