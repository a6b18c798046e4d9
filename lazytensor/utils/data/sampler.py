"""Samplers in PyTorch's shape: the orders in which DataLoader visits a map-style dataset. Random orders
come from lazytensor's seeded generator (lt.manual_seed, or a `generator=`)."""
from ...random import randint, randperm


def permutation(n, generator):
    """A random order of range(n) as Python ints (one randperm, read on the host)."""
    return [int(i) for i in randperm(n, generator=generator).numpy()]


class Sampler:
    """Yields dataset indices."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of the indices (each epoch a new one), or with `replacement` `num_samples`
    independent uniform indices."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = num_samples
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            raise ValueError(f"RandomSampler: num_samples must be a positive integer, got {num_samples!r}")
        if self.num_samples <= 0:  # as PyTorch: an empty dataset cannot be shuffled, said where it is made
            raise ValueError("RandomSampler: the dataset is empty (num_samples=0); shuffle needs at least one "
                             "sample")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        if self.replacement:
            chunk = 32
            for start in range(0, self.num_samples, chunk):
                count = min(chunk, self.num_samples - start)
                yield from (int(i) for i in randint(0, n, (count,), generator=self.generator).numpy())
            return
        for start in range(0, self.num_samples, n):
            yield from permutation(n, self.generator)[:self.num_samples - start]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    def __init__(self, indices, generator=None):
        self.indices, self.generator = list(indices), generator

    def __iter__(self):
        return (self.indices[i] for i in permutation(len(self.indices), self.generator))

    def __len__(self):
        return len(self.indices)


class BatchSampler(Sampler):
    """Groups a sampler's indices into lists of batch_size (the last shorter unless drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"BatchSampler: batch_size must be a positive integer, got {batch_size!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
