"""Collectives between processes: the interface data-parallel training uses, and MPI (mpi4py) as its
first implementation (an NCCL one would carry device buffers instead; docs/DISTRIBUTED.md sketches it).

Values cross as host arrays, moved as raw bytes, so every dtype travels unchanged. Reductions have a
fixed order and so give every rank the same bytes: the flat value is cut into one chunk per rank; each
rank receives every rank's copy of its chunk (an all-to-all), folds them in rank order (float64 for
floats, int64 for integers, rounded once to the dtype), and the reduced chunks are gathered back to
every rank (an all-gather). Each rank sends and receives 2·(N−1)/N of the value's bytes, what a ring
all-reduce moves, and no rank's result depends on the MPI library's reduction algorithm.
"""
import os

import numpy as np

REDUCE_OPS = ("sum", "mean", "max", "min")

# Set for each rank by the MPI launchers we know of (MPICH/Hydra and Intel MPI, Open MPI, PMIx and
# Slurm's srun); not SLURM_NTASKS, which a batch script's single python process also sees.
_LAUNCHER_SIZE = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PMIX_SIZE")


# (rank, size, local rank, local size) as each launcher names them.
_LAUNCHER_RANKS = (("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
                   ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                    "OMPI_COMM_WORLD_LOCAL_SIZE"),
                   ("PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE"))


def launcher_ranks():
    """{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"} as the MPI launcher gave them to this process
    (a launcher that names no local rank: the local ones are the global ones), or None without one."""
    for names in _LAUNCHER_RANKS:
        values = [os.environ.get(n) for n in names]
        if values[0] is not None and values[1] is not None:
            rank, size = values[0], values[1]
            local_rank = values[2] if values[2] is not None else rank
            local_size = values[3] if values[3] is not None else size
            return {"RANK": rank, "WORLD_SIZE": size, "LOCAL_RANK": local_rank, "LOCAL_WORLD_SIZE": local_size}
    return None


def launched_by_mpi():
    """Whether this process was started by an MPI launcher with more than one rank."""
    for name in _LAUNCHER_SIZE:
        value = os.environ.get(name)
        if value and value.isdigit() and int(value) > 1:
            return True
    return False


class Collectives:
    """A transport between the ranks of one job. Every method is collective: every rank calls it, in
    the same order, with arrays of the same shape and dtype."""

    rank, size, name = 0, 1, "none"

    def all_to_all(self, rows):
        """`rows` (size, n) uint8: row j goes to rank j; returns (size, n) uint8, row i from rank i."""
        raise NotImplementedError

    def all_gather(self, row):
        """`row` (n,) uint8 from every rank; returns (size, n) uint8 in rank order."""
        raise NotImplementedError

    def broadcast(self, row, root):
        """`row` (n,) uint8, overwritten on every rank with the root's bytes."""
        raise NotImplementedError

    def barrier(self):
        raise NotImplementedError

    def abort(self, code=1):
        """End every rank's process now (a rank that failed must not leave the others waiting)."""
        raise NotImplementedError


class MPICollectives(Collectives):
    """Collectives over MPI_COMM_WORLD through mpi4py (the `[mpi]` extra, or a site's own build)."""

    name = "mpi"

    def __init__(self):
        try:
            from mpi4py import MPI
        except ImportError as exc:
            raise RuntimeError("lazytensor.distributed needs mpi4py and an MPI library: "
                               "pip install 'lazytensor[mpi]' (mpi4py and MPICH wheels), or mpi4py built "
                               "against your cluster's MPI") from exc
        self.comm = MPI.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.library = " ".join(MPI.Get_library_version().splitlines()[0].split())

    def all_to_all(self, rows):
        out = np.empty_like(rows)
        self.comm.Alltoall(rows, out)
        return out

    def all_gather(self, row):
        out = np.empty((self.size, row.shape[0]), np.uint8)
        self.comm.Allgather(row, out)
        return out

    def broadcast(self, row, root):
        self.comm.Bcast(row, root=root)
        return row

    def barrier(self):
        self.comm.Barrier()

    def abort(self, code=1):
        self.comm.Abort(code)


def _bytes(array):
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def all_reduce(comm, array, op):
    """The fixed-order reduction (module docstring) of every rank's `array` by `op`; a new array of
    the same shape and dtype on every rank ("mean" of integers is refused by the caller)."""
    array = np.ascontiguousarray(array)
    if comm.size == 1 or array.size == 0:
        return array.copy()
    flat = array.reshape(-1)
    n, dtype = flat.shape[0], array.dtype
    chunk = -(-n // comm.size)
    padded = np.zeros(chunk * comm.size, dtype)
    padded[:n] = flat
    mine = comm.all_to_all(padded.view(np.uint8).reshape(comm.size, chunk * dtype.itemsize))
    copies = mine.view(dtype).reshape(comm.size, chunk)  # row i: rank i's copy of my chunk
    reduced = _fold(copies, op, dtype, comm.size)
    gathered = comm.all_gather(_bytes(reduced))
    return gathered.view(dtype).reshape(-1)[:n].reshape(array.shape)


def _fold(rows, op, dtype, size):
    """`rows` folded over ranks in rank order, rounded once to `dtype`."""
    if op in ("max", "min"):
        return (np.maximum if op == "max" else np.minimum).reduce(rows, axis=0)
    if dtype.kind == "b":
        return np.logical_or.reduce(rows, axis=0)  # a sum of booleans is "any", as in PyTorch
    wide = np.float64 if dtype.kind in "fc" else np.int64
    acc = rows[0].astype(wide)
    for r in range(1, size):
        acc = acc + rows[r].astype(wide)
    if op == "mean":
        acc = acc / size
    with np.errstate(over="ignore"):
        return acc.astype(dtype)


def all_gather(comm, array):
    """Every rank's `array` stacked in rank order: shape (size, *array.shape)."""
    array = np.ascontiguousarray(array)
    gathered = comm.all_gather(_bytes(array))
    return gathered.view(array.dtype).reshape((comm.size,) + array.shape)


def broadcast(comm, array, root):
    """The root rank's `array` (a new array) on every rank."""
    row = _bytes(array).copy()
    comm.broadcast(row, root)
    return row.view(np.asarray(array).dtype).reshape(np.shape(array))
