"""`lt.nn.parallel` in the shape of `torch.nn.parallel`: DistributedDataParallel (lazytensor/distributed.py,
over MPI), so `from torch.nn.parallel import DistributedDataParallel as DDP` works as written."""
from ..distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
