"""The one bound on what the replay wing keeps: least recently used recordings go first."""
import collections

_MISSING = object()


class Bounded:
    """A mapping of at most `size` entries. `get` makes the entry it finds the most recently used;
    `put` past the size drops the least recently used. A lookup compares its key with a kept one once
    (signatures compare item by item)."""

    def __init__(self, size):
        self.size = size
        self._entries = collections.OrderedDict()

    def get(self, key, default=None):
        value = self._entries.pop(key, _MISSING)  # then put back last, under the key just given
        if value is _MISSING:
            return default
        self._entries[key] = value
        return value

    def put(self, key, value):
        self._entries.pop(key, None)
        self._entries[key] = value
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def pop(self, key, default=None):
        return self._entries.pop(key, default)

    def clear(self):
        self._entries.clear()

    def __len__(self):
        return len(self._entries)

    def __contains__(self, key):
        return key in self._entries
