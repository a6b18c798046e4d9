"""Matrix products (2-D, batched with broadcasting batch dims, matrix-vector, vector dot products, addmm),
vector norms and diagonals."""
from . import amp as _amp, dtypes
from .creation import arange, zeros
from .elementwise import broadcast_shapes, where
from .shape_ops import cat
from .tensor import Tensor


def matmul(a, b):
    """NumPy's matmul rules: 1-D operands are promoted to matrices and the added dim is removed."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError("matmul: both operands must be tensors")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: both operands need at least one dimension, got shapes {a.shape} and "
                         f"{b.shape}; use * to multiply by a scalar")
    if dtypes.bool_ in (a.dtype, b.dtype):
        raise TypeError("matmul: not defined for bool tensors; cast to a number type first")
    if _amp._REGIONS:
        a, b = _amp.lower(a, b)
    sa = (1,) + a.shape if a.ndim == 1 else a.shape
    sb = b.shape + (1,) if b.ndim == 1 else b.shape
    if sa[-1] != sb[-2]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not match: the inner dimensions "
                         f"{sa[-1]} and {sb[-2]} differ")
    batch = broadcast_shapes("matmul", sa[:-2], sb[:-2])
    shape = batch + (sa[-2], sb[-1])
    if a.ndim == 1:
        shape = shape[:-2] + shape[-1:]
    if b.ndim == 1:
        shape = shape[:-1]
    dt = dtypes.promote(a.dtype, b.dtype)
    return Tensor._from_op("matmul", (a, b), {"dtype": dt.np}, shape, dt)


def outer(a, b):
    """The outer product of two 1-D tensors: (n,) and (m,) give (n, m)."""
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"outer: expected two 1-D tensors, got shapes {a.shape} and {b.shape}")
    return a.reshape(-1, 1) * b.reshape(1, -1)


def bmm(a, b):
    """Batched matrix product of (B, n, k) and (B, k, m) (no broadcasting, as PyTorch's bmm)."""
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ValueError(f"bmm: expected (B, n, k) and (B, k, m), got {a.shape} and {b.shape}")
    return matmul(a, b)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):  # noqa: A002  (PyTorch's name)
    """beta * input + alpha * (mat1 @ mat2), for 2-D mat1 and mat2 (input broadcasts to the product)."""
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise ValueError(f"addmm: expected 2-D matrices, got {mat1.shape} and {mat2.shape}")
    return _scaled_sum(input, matmul(mat1, mat2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """beta * input + alpha * bmm(batch1, batch2)."""
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


def _scaled_sum(input, product, beta, alpha):  # noqa: A002
    product = product if alpha == 1 else product * alpha
    if beta == 0:  # as PyTorch: input is ignored (its NaN or inf does not propagate)
        return product
    return product + (input if beta == 1 else input * beta)


def vector_norm(x, ord=2, dim=None, keepdim=False):  # noqa: A002
    """The p-norm of `x` over `dim` (all dims if None): ord 2 (default), 1, inf, -inf, 0 (the count of
    nonzeros), or any other float (sum |x|^ord)^(1/ord). Float inputs only."""
    if not x.dtype.is_floating_point:
        raise TypeError(f"vector_norm: expected a float tensor, got {x.dtype}")
    a = x.abs()
    if ord == float("inf"):
        return a.amax(dim=dim, keepdim=keepdim)
    if ord == float("-inf"):
        return a.amin(dim=dim, keepdim=keepdim)
    if ord == 0:
        return (x != 0).to(x.dtype).sum(dim=dim, keepdim=keepdim)
    if ord == 1:
        return a.sum(dim=dim, keepdim=keepdim)
    if ord == 2:
        return (x * x).sum(dim=dim, keepdim=keepdim).sqrt()
    return (a ** ord).sum(dim=dim, keepdim=keepdim) ** (1.0 / ord)


def norm(x, p="fro", dim=None, keepdim=False):
    """PyTorch's Tensor.norm: the vector p-norm over `dim` ("fro" is 2 over the given dims)."""
    return vector_norm(x, 2 if p == "fro" else p, dim, keepdim)


def diag(x, diagonal=0):
    """A 1-D tensor's diagonal matrix (the values on the `diagonal`-th diagonal), or a 2-D tensor's
    `diagonal`-th diagonal as a 1-D tensor, as PyTorch's diag."""
    k = int(diagonal)
    if x.ndim == 1:
        n = x.shape[0]
        m = n + abs(k)
        rows = arange(m).reshape(m, 1)
        cols = arange(m).reshape(1, m)
        padded = cat([x, zeros(abs(k), dtype=x.dtype)]) if k else x
        values = padded.reshape(m, 1) if k >= 0 else padded.reshape(1, m)
        return where(cols - rows == k, values, zeros((), dtype=x.dtype))
    if x.ndim == 2:
        n = max(0, min(x.shape[0], x.shape[1] - k) if k >= 0 else min(x.shape[0] + k, x.shape[1]))
        i = arange(n)
        return x[i, i + k] if k >= 0 else x[i - k, i]
    raise ValueError(f"diag: expected a 1-D or 2-D tensor, got shape {x.shape}")


def einsum(equation, *operands):
    """Einstein summation, as torch.einsum / np.einsum: "ij,jk->ik", implicit output ("ij,jk" sums the
    repeated letters), "..." for leading dims, repeated letters in one operand take its diagonal. Two-
    operand contractions become one matmul; anything else multiplies broadcast operands and sums."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum: {equation!r} names {len(terms)} operands, {len(operands)} were given")
    ell = max((t.ndim - len(s.replace("...", "")) for s, t in zip(terms, operands) if "..." in s), default=0)
    ell_letters = "".join(chr(0x100 + i) for i in range(ell))  # stand-ins for the "..." dims
    terms = [s.replace("...", ell_letters[ell - (t.ndim - len(s.replace("...", ""))):]) for s, t in zip(terms, operands)]
    for s, t in zip(terms, operands):
        if len(s) != t.ndim or not all(c.isalpha() for c in s):
            raise ValueError(f"einsum: subscripts {s!r} do not fit an operand of shape {t.shape}")
    if arrow:
        out = rhs.replace("...", ell_letters)
    else:
        counts = {}
        for s in terms:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell_letters + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell_letters))
    sizes = {}
    views = []
    for s, t in zip(terms, operands):
        t, s = _diagonals(t, s)
        for c, n in zip(s, t.shape):
            if sizes.setdefault(c, n) != n and 1 not in (n, sizes[c]):
                raise ValueError(f"einsum: letter {c!r} has sizes {sizes[c]} and {n}")
            sizes[c] = max(sizes[c], n)
        views.append((t, s))
    for c in out:
        if c not in sizes:
            raise ValueError(f"einsum: output letter {c!r} appears in no operand")
    letters = list(dict.fromkeys(out + "".join(s for _, s in views)))
    if len(views) == 2:
        product = _contract(views, out, letters, sizes)
        if product is not None:
            return product
    total = None
    for t, s in views:
        order = [s.index(c) for c in letters if c in s]
        shaped = t.permute(*order).reshape(*[sizes[c] if c in s else 1 for c in letters])
        total = shaped if total is None else total * shaped
    summed = [i for i, c in enumerate(letters) if c not in out]
    if summed:
        total = total.sum(dim=tuple(summed))
    kept = [c for c in letters if c in out]
    return total.permute(*[kept.index(c) for c in out]) if kept != list(out) else total


def _diagonals(t, s):
    """An operand whose subscripts repeat a letter ("ii"): its diagonal over those dims."""
    while len(set(s)) != len(s):
        c = next(c for c in s if s.count(c) > 1)
        i, j = s.index(c), s.index(c, s.index(c) + 1)
        n = t.shape[i]
        idx = arange(n)
        moved = t.permute(i, j, *[k for k in range(t.ndim) if k not in (i, j)])
        t, s = moved[idx, idx], c + "".join(x for k, x in enumerate(s) if k not in (i, j))
    return t, s


def _contract(views, out, letters, sizes):
    """Two operands as one batched matmul: batch letters (in both and the output), free letters of each,
    summed letters (in both, not the output). None when a letter fits none of these."""
    (a, sa), (b, sb) = views
    batch = [c for c in letters if c in sa and c in sb and c in out]
    summed = [c for c in letters if c in sa and c in sb and c not in out]
    free_a = [c for c in sa if c not in sb]
    free_b = [c for c in sb if c not in sa]
    if any(c not in out for c in free_a + free_b) or any(a.shape[sa.index(c)] != b.shape[sb.index(c)]
                                                         for c in batch + summed):
        return None
    n = 1
    for c in free_a:
        n *= sizes[c]
    m = 1
    for c in free_b:
        m *= sizes[c]
    k = 1
    for c in summed:
        k *= sizes[c]
    bs = [sizes[c] for c in batch]
    am = a.permute(*[sa.index(c) for c in batch + free_a + summed]).reshape(*bs, n, k)
    bm = b.permute(*[sb.index(c) for c in batch + summed + free_b]).reshape(*bs, k, m)
    res = matmul(am, bm).reshape(*bs, *[sizes[c] for c in free_a], *[sizes[c] for c in free_b])
    got = batch + free_a + free_b
    return res.permute(*[got.index(c) for c in out]) if got != list(out) else res
