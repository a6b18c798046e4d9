"""The names modules give their parameters and buffers ("blocks.0.attn.weight"), so that the transfer
log can say whose value a copy moved rather than which op made it (`Transfer.name`).

A tensor keeps the most qualified name it was seen under: the local one when a module is given it, the
full one when its model lists its parameters (an optimizer's `model.parameters()`, a state dict).
Tensors are held weakly; the node ids they hold now are indexed once per realization, when a copy is
recorded."""
import weakref

from ..runtime import transfers
from ..runtime.counters import COUNTERS

_NAMES = {}  # id(tensor) -> (weak reference to it, its name)
_INDEX = {"realization": -1, "names": {}}  # node id -> name, as of that realization


def note(tensor, name):
    """`tensor` is called `name` by a module (kept unless it already has a more qualified name)."""
    known = _NAMES.get(id(tensor))
    if known is not None and known[0]() is tensor and known[1].count(".") >= name.count("."):
        return
    key = id(tensor)
    _NAMES[key] = (weakref.ref(tensor, lambda _, key=key: _NAMES.pop(key, None)), name)
    _INDEX["realization"] = -1


def name_of(node_id):
    """The name of the parameter or buffer whose value is node `node_id` now, or ""."""
    if _INDEX["realization"] != COUNTERS.realizations:
        names = {}
        for ref, name in list(_NAMES.values()):
            tensor = ref()
            if tensor is not None and tensor._node is not None:
                names[tensor._node.id] = name
        _INDEX["realization"], _INDEX["names"] = COUNTERS.realizations, names
    return _INDEX["names"].get(node_id, "")


transfers.LOG.namer = name_of
