"""`__array_namespace_info__()`: the namespace's devices, default dtypes and capabilities."""
from .. import dtypes
from ..runtime import devices as _devices
from ._dtypes import KINDS, STANDARD


class Info:
    """What the Array API's inspection functions report for lazytensor."""

    def capabilities(self):
        # Boolean-mask reads and nonzero/unique work, reading their input on the host.
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self):
        return "cpu"

    def devices(self):
        active = _devices.active_name()
        return ["cpu"] + ([active] if active != "cpu" else [])

    def default_dtypes(self, *, device=None):
        return {"real floating": dtypes.DEFAULT_FLOAT, "complex floating": dtypes.DEFAULT_COMPLEX,
                "integral": dtypes.int64, "indexing": dtypes.int64}

    def dtypes(self, *, device=None, kind=None):
        if kind is None:
            chosen = STANDARD
        else:
            kinds = kind if isinstance(kind, tuple) else (kind,)
            chosen = tuple(d for d in STANDARD if any(d in KINDS[k] if isinstance(k, str) else d == k
                                                     for k in kinds))
        return {d.name: d for d in chosen}


def __array_namespace_info__():
    return Info()
