"""A first-fit allocator over one contiguous byte range, with coalescing of neighbouring free blocks."""
import bisect


class OutOfDeviceMemory(MemoryError):
    """The device has no free block large enough for a request."""


class Arena:
    """Hands out [offset, offset + size) ranges of a region of `capacity` bytes."""

    ALIGN = 256

    def __init__(self, capacity):
        self.capacity = int(capacity)
        self._starts = [0]            # free blocks, sorted by start
        self._sizes = {0: self.capacity}
        self.used = 0

    def alloc(self, size):
        """The offset of a free block of at least `size` bytes (rounded to ALIGN); OutOfDeviceMemory if none."""
        size = max(self.ALIGN, -(-int(size) // self.ALIGN) * self.ALIGN)
        for i, start in enumerate(self._starts):
            free = self._sizes[start]
            if free >= size:
                del self._sizes[start]
                del self._starts[i]
                if free > size:
                    self._insert(start + size, free - size)
                self.used += size
                return start, size
        raise OutOfDeviceMemory(f"no free block of {size} bytes ({self.capacity - self.used} bytes free "
                                f"of {self.capacity}, fragmented into {len(self._starts)} blocks)")

    def free(self, start, size):
        self.used -= size
        self._insert(start, size)

    def _insert(self, start, size):
        i = bisect.bisect_left(self._starts, start)
        # Merge with the following free block, then with the preceding one.
        if i < len(self._starts) and self._starts[i] == start + size:
            size += self._sizes.pop(self._starts[i])
            del self._starts[i]
        if i > 0:
            prev = self._starts[i - 1]
            if prev + self._sizes[prev] == start:
                self._sizes[prev] += size
                return
        self._starts.insert(i, start)
        self._sizes[start] = size

    @property
    def free_bytes(self):
        return self.capacity - self.used
