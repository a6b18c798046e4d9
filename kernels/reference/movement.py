"""Movement kernels: reshape, permute, expand, slice, concatenate, copy, triangle masks.

Results may be NumPy views of their input; the runtime never writes into a view in place.
"""
import numpy as np


def reshape(attrs, x):
    return x.reshape(attrs["shape"])


def permute(attrs, x):
    return x.transpose(attrs["dims"])


def expand(attrs, x):
    return np.broadcast_to(x, attrs["shape"])


def slice_(attrs, x):
    """x[slices], without the axes `squeeze` names (each of extent 1: an integer index's)."""
    out = x[tuple(slice(*s) for s in attrs["slices"])]
    return np.squeeze(out, axis=attrs["squeeze"]) if "squeeze" in attrs else out


def cat(attrs, *xs):
    return np.concatenate(xs, axis=attrs["axis"]).astype(np.dtype(attrs["dtype"]), copy=False)


def contiguous(attrs, x):
    return np.asarray(x, order="C")  # x itself where it is already dense (a product laid out as read)


def tril(attrs, x):
    return np.tril(x, attrs["k"])


def triu(attrs, x):
    return np.triu(x, attrs["k"])


MOVEMENT_KERNELS = {"reshape": reshape, "permute": permute, "expand": expand, "slice": slice_,
                    "cat": cat, "contiguous": contiguous, "tril": tril, "triu": triu}


def pad_slice(attrs, g):
    """The gradient of a slice: zeros of the source shape with `g` placed where the slice read."""
    out = np.zeros(attrs["shape"], dtype=g.dtype)
    out[tuple(slice(*s) for s in attrs["slices"])] = g
    return out


def place_slices(attrs, *pieces):
    """Zeros of `shape` with each piece placed at its slices (disjoint regions): the sum of the pieces'
    pad_slices, one node for the gradient of a tensor read in several slices (split, q/k/v)."""
    out = np.zeros(attrs["shape"], dtype=np.dtype(attrs["dtype"]))
    for slices, piece in zip(attrs["slices"], pieces):
        out[tuple(slice(*s) for s in slices)] = piece
    return out


MOVEMENT_KERNELS["pad_slice"] = pad_slice
MOVEMENT_KERNELS["place_slices"] = place_slices
