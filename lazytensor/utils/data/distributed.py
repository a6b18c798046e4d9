"""`torch.utils.data.distributed.DistributedSampler`: each rank of a data-parallel job reads its own share
of the dataset, the shares disjoint and together the whole (padded by repeating the first indices, or cut
with drop_last), reshuffled each epoch by `set_epoch` from the same seed on every rank."""
import math

from ... import distributed as _dist
from ...random import Generator
from .sampler import Sampler, permutation


class DistributedSampler(Sampler):
    """PyTorch's arguments: num_replicas and rank default to the job's (lt.distributed), shuffle with a
    seed shared by the ranks, drop_last to cut the tail instead of padding it."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            if not _dist.is_initialized():
                raise RuntimeError("DistributedSampler: call init_process_group first, or give num_replicas and "
                                   "rank")
            num_replicas = _dist.world_size() if num_replicas is None else num_replicas
            rank = _dist.rank() if rank is None else rank
        if not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: rank {rank} is not in [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch):
        """The epoch whose order the next pass draws (the same on every rank)."""
        self.epoch = epoch

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            indices = permutation(n, Generator().manual_seed(self.seed + self.epoch))
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            padding = self.total_size - len(indices)
            indices += (indices * math.ceil(padding / max(len(indices), 1)))[:padding]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples
