"""Signatures: what makes two recordings interchangeable, as a dict key. A replay's caller builds a tuple
of everything its recording depends on (ops, attributes, shapes, dtypes, wiring, settings); `Key` hashes
it cheaply and `frozen` makes attributes comparable (a float zero keeps its sign)."""
import math

import numpy as np

from .. import rng


class Key:
    """A signature (a tuple) as a dict key, hashed by the ops it covers alone: hashing every item
    (dtypes, attributes, shapes) costs more than the lookup it serves (bench/RESULTS.md, 'Figures behind the
    code's choices'), and a lookup compares equal hashes item by item anyway. A realization and a backward
    pass look their key up once per step."""

    __slots__ = ("items", "hash")

    def __init__(self, items, ops):
        self.items, self.hash = items, hash(ops)

    def __hash__(self):
        return self.hash

    def __eq__(self, other):
        return self.hash == other.hash and self.items == other.items

    def storable(self):
        """Whether every item can be hashed and compared (not an array attribute): checked once, before
        the key is first kept, so that no lookup compares a kept key that cannot be compared."""
        try:
            hash(self.items)
        except (TypeError, ValueError):
            return False
        return True


_ZERO_SIGNED = (float, complex, np.floating, np.complexfloating)  # values whose zero has a sign
# attribute values equal only to themselves (no signed zero): most attributes are dtypes, ints, axes
_PLAIN = frozenset({int, bool, str, type(None)} | {type(np.dtype(c)) for c in "?bhilqBHILQefdgFDG"})


def frozen(attrs):
    """The attributes as a comparable tuple. 0.0 == -0.0 in Python and a plan bakes in the values it was
    captured with, so a zero float (alone, or in a tuple of scalars: attributes hold no deeper floats)
    is kept with its sign. ValueError or TypeError where a value cannot be compared (an array)."""
    for value in attrs.values():
        t = type(value)
        if t in _PLAIN:
            continue
        if t is tuple:
            for v in value:
                if type(v) not in _PLAIN and isinstance(v, _ZERO_SIGNED) and v == 0:
                    return tuple((k, _signed(v)) for k, v in attrs.items())
        elif isinstance(value, _ZERO_SIGNED) and value == 0:
            return tuple((k, _signed(v)) for k, v in attrs.items())
    return tuple(attrs.items())


def _signed(value):
    if isinstance(value, _ZERO_SIGNED):
        return (value, math.copysign(1.0, value.real), math.copysign(1.0, value.imag))
    if type(value) is tuple:
        return tuple(_signed(v) if isinstance(v, _ZERO_SIGNED) else v for v in value)
    return value


def random_relative(attrs, first_stream):
    """A random op's attributes as a signature holds them: its stream counted from `first_stream` (the
    recording's first random op's; each step draws new streams), its seed as whether it is the
    generator's seed now (a replay draws under that seed)."""
    return {**attrs, "stream": attrs["stream"] - first_stream, "seed": attrs["seed"] == rng.DEFAULT.seed}
