"""DataLoader in PyTorch's shape and its collation: batches are made in this process (`num_workers` and
`pin_memory` are accepted: host-device copies go through pinned buffers already) and collated into
lazytensor tensors (numbers, NumPy arrays and tensors are stacked; dicts, tuples and lists field by
field)."""
import itertools
import numbers

import numpy as np

from ...creation import tensor
from ...shape_ops import stack
from ...tensor import Tensor
from .dataset import IterableDataset, Subset, TensorDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler


def default_collate(batch):
    """Stack a list of samples into a batch: tensors and arrays along a new first axis, numbers into a
    tensor, strings kept as a list; dicts, tuples and lists field by field."""
    first = batch[0]
    if isinstance(first, Tensor):
        return stack(list(batch), 0)
    if isinstance(first, np.ndarray):
        return tensor(np.stack(batch))
    if isinstance(first, (bool, np.bool_)) or isinstance(first, numbers.Number) or isinstance(first, np.generic):
        return tensor(np.array(batch))
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, dict):
        return {k: default_collate([b[k] for b in batch]) for k in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(default_collate(list(f)) for f in zip(*batch)))
    if isinstance(first, (tuple, list)):
        if any(len(b) != len(first) for b in batch):
            raise RuntimeError("default_collate: every sample in a batch must have the same number of fields")
        return [default_collate(list(f)) for f in zip(*batch)]
    raise TypeError(f"default_collate: cannot batch samples of type {type(first).__name__}; pass a collate_fn")


def default_convert(data):
    """What DataLoader gives without batching: NumPy arrays become tensors, the rest stays."""
    if isinstance(data, np.ndarray):
        return tensor(data)
    if isinstance(data, dict):
        return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, (tuple, list)) and not isinstance(data, str):
        return type(data)(default_convert(v) for v in data) if not hasattr(data, "_fields") \
            else type(data)(*(default_convert(v) for v in data))
    return data


def _tensor_rows(dataset):
    """(the TensorDataset under `dataset`, the row of it each index of `dataset` reads, or None for the
    rows themselves) when `dataset` is a TensorDataset or Subsets of one (random_split's); (None, None)
    otherwise."""
    positions = None
    while type(dataset) is Subset:
        own = np.fromiter((int(i) for i in dataset.indices), np.int64, len(dataset.indices))
        positions = own if positions is None else own[positions]
        dataset = dataset.dataset
    if type(dataset) is not TensorDataset:
        return None, None
    if positions is not None:
        n = len(dataset)
        if positions.size and (positions.min() < -n or positions.max() >= n):
            return None, None  # let indexing say which index is out of range
        positions = np.where(positions < 0, positions + n, positions)
    return dataset, positions


def get_worker_info():
    """None: batches are made in the calling process (as PyTorch's main process sees it)."""
    return None


class DataLoader:
    """Batches from a dataset, PyTorch's arguments: batch_size (None: no batching), shuffle, sampler,
    batch_sampler, num_workers, collate_fn, pin_memory, drop_last, generator, ... A new pass (iter) draws
    a new order when shuffling."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device=""):
        if num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be non-negative, got {num_workers}")
        self.dataset, self.num_workers, self.pin_memory, self.timeout = dataset, num_workers, pin_memory, timeout
        self.generator, self.drop_last = generator, drop_last
        iterable = isinstance(dataset, IterableDataset)
        if iterable and (shuffle or sampler is not None or batch_sampler is not None):
            raise ValueError("DataLoader: an IterableDataset takes no shuffle, sampler or batch_sampler")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler and shuffle are mutually exclusive")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
            raise ValueError("DataLoader: batch_sampler excludes batch_size, shuffle, sampler and drop_last")
        if batch_sampler is not None:
            batch_size, drop_last = None, False
        if sampler is None and not iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.sampler, self.batch_sampler = batch_size, sampler, batch_sampler
        self._iterable = iterable
        self.collate_fn = collate_fn or (default_collate if batch_size is not None or batch_sampler is not None
                                         else default_convert)
        if worker_init_fn is not None and num_workers > 0:
            worker_init_fn(0)

    def __iter__(self):
        if self._iterable:
            it = iter(self.dataset)
            if self.batch_size is None:
                yield from (self.collate_fn(x) for x in it)
                return
            while True:
                batch = list(itertools.islice(it, self.batch_size))
                if not batch or (self.drop_last and len(batch) < self.batch_size):
                    return
                yield self.collate_fn(batch)
        elif self.batch_sampler is not None:
            base, positions = _tensor_rows(self.dataset) if self.collate_fn is default_collate else (None, None)
            fetch = getattr(self.dataset, "__getitems__", None)
            for indices in self.batch_sampler:
                if base is not None:  # the rows of each tensor in one index_select: the samples' stack, one node
                    rows = np.asarray(indices, dtype=np.int64)
                    rows = tensor(rows if positions is None else positions[rows])
                    yield [t.index_select(0, rows) for t in base.tensors]
                    continue
                samples = fetch(indices) if fetch else [self.dataset[i] for i in indices]
                yield self.collate_fn(samples)
        else:
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler) if self.batch_sampler is not None else len(self.sampler)
