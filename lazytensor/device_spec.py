"""`lt.device` (PyTorch's torch.device): what `Tensor.device` gives and every `device=` takes.

A device is a string ("cpu", "cuda:0") with PyTorch's `type` and `index`: it compares equal to its
name, and every function that takes a device name takes it.
"""
from .runtime import devices as _devices


class device(str):  # noqa: N801  (PyTorch's name)
    """`lt.device("cuda")`, `lt.device("cuda", 0)`, `lt.device("cuda:1")`: a device name with `.type` and
    `.index`. ValueError for a name that is no registered device."""

    def __new__(cls, type, index=None):  # noqa: A002  (PyTorch's argument names)
        if isinstance(type, device) and index is None:
            return type
        text = str(type).strip().lower()
        base, _, suffix = text.partition(":")
        if suffix:
            if index is not None:
                raise ValueError(f"device({type!r}, {index}): give the index once")
            if not suffix.isdigit():
                raise ValueError(f"device({type!r}): the index after ':' must be a number")
            index = int(suffix)
        if not _devices.is_device_name(base):
            raise ValueError(f"unknown device {type!r}; lazytensor has {', '.join(_devices.names()[1:])}")
        if index is not None and (isinstance(index, bool) or int(index) < 0):
            raise ValueError(f"device({type!r}, {index!r}): the index must be a non-negative integer")
        out = super().__new__(cls, base if index is None else f"{base}:{int(index)}")
        out._type, out._index = base, None if index is None else int(index)
        return out

    @property
    def type(self):
        return self._type

    @property
    def index(self):
        return self._index

    def __repr__(self):
        return f"device(type='{self._type}'" + ("" if self._index is None else f", index={self._index}") + ")"

    def __eq__(self, other):
        if isinstance(other, str):
            other = str(other).strip().lower()
            return str.__eq__(self, other) or (self._index in (None, 0) and other.split(":")[0] == self._type
                                               and other.partition(":")[2] in ("", "0"))
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = str.__hash__

    def __reduce__(self):
        return device, (self._type, self._index)
