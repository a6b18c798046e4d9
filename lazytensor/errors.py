"""Exceptions with messages a user can act on."""


class AxisError(IndexError, ValueError):
    """An axis (dim) outside the tensor's dimensions; an IndexError like PyTorch's, a ValueError like NumPy's."""


def normalize_axis(op, axis, ndim):
    """Map a possibly negative axis into [0, ndim); AxisError naming the valid range otherwise."""
    if isinstance(axis, bool) or not isinstance(axis, int):
        try:
            axis = int(axis.__index__())
        except AttributeError:
            raise TypeError(f"{op}: axis must be an integer, got {type(axis).__name__}") from None
    if not -ndim <= axis < ndim:
        lo, hi = -ndim, ndim - 1
        rng = f"[{lo}, {hi}]" if ndim else "none (the tensor is 0-d)"
        raise AxisError(f"{op}: axis {axis} is out of range for a tensor of dimension {ndim} "
                        f"(valid: {rng})")
    return axis % ndim


def normalize_axes(op, axes, ndim):
    """A sorted tuple of distinct axes; None means every axis."""
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, (list, tuple)):
        out = tuple(normalize_axis(op, a, ndim) for a in axes)
    else:
        out = (normalize_axis(op, axes, ndim),)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axes}")
    return tuple(sorted(out))
