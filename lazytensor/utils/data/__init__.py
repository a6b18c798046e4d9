"""torch.utils.data in PyTorch's shape (`lazytensor.utils.data`): datasets, samplers, DataLoader.

Random orders come from the seeded generator (lt.manual_seed, or a `generator=`): the same seed gives the
same order. `get_worker_info()` is None, as in PyTorch's main process: batches are made in this one.
"""
from .dataloader import DataLoader, default_collate, default_convert, get_worker_info
from .dataset import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler
from . import distributed
from .distributed import DistributedSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info", "Dataset", "IterableDataset",
           "TensorDataset", "Subset", "ConcatDataset", "random_split", "Sampler", "SequentialSampler",
           "RandomSampler", "SubsetRandomSampler", "BatchSampler", "DistributedSampler", "distributed"]
