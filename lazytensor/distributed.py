"""Data-parallel training across processes, in PyTorch's shape (`torch.distributed` and DDP), over MPI.

    mpiexec -n 2 python train.py        # every rank runs the same program
    import lazytensor.distributed as dist
    dist.init()                          # from the MPI environment
    model = dist.DistributedDataParallel(model)   # parameters broadcast from rank 0
    loss.backward()                      # gradients averaged across ranks, in buckets, fixed order

A collective is a host read: it realizes its tensor, downloads a device-only value (transfer log reason
"collective"), exchanges host bytes (runtime/collectives.py: fixed-order reductions, the same bytes on
every rank) and puts the result back where the tensor lived (reason "collective-result"). Inside
`lt.profile()` each collective is a kernel record of backend "mpi", so the summary shows the time spent
communicating. Collectives are in-place on their tensor, as in PyTorch.

A program written for torchrun reads RANK, LOCAL_RANK and WORLD_SIZE from its environment; under mpiexec
(more than one rank) importing lazytensor sets the ones the launcher did not, from the launcher's own
variables, so `mpiexec -n 2 python train.py` starts such a program as `torchrun --nproc_per_node=2` would.
"""
import contextlib
import os
import sys
import time
import traceback
import weakref

from . import autograd
from .creation import zeros
from .grad_mode import is_grad_enabled, no_grad
from .runtime import collectives as _coll
from .runtime import hostio
from .runtime.transfers import now
from .shape_ops import cat
from .tensor import Tensor

# Time given to mpiexec to forward a failing rank's last words before the abort ends every process.
_FORWARDING_GRACE_S = 0.5
_STATE = {"comm": None, "calls": 0, "seconds": 0.0, "bytes": 0}


def _torchrun_variables():
    """Set RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from the MPI launcher's variables (each one
    only where it is unset) when this process is one rank of several started by mpiexec."""
    if _coll.launched_by_mpi():
        for name, value in (_coll.launcher_ranks() or {}).items():
            os.environ.setdefault(name, value)


_torchrun_variables()


def init(abort_on_exception=True):
    """Join the job this process was started in (`mpiexec -n N`; a plain `python` run is a job of one).
    Idempotent. With `abort_on_exception`, an uncaught exception on any rank prints its traceback and
    aborts every rank, so no rank waits forever in a collective for one that failed."""
    if _STATE["comm"] is None:
        _STATE["comm"] = _coll.MPICollectives()
        if abort_on_exception and _STATE["comm"].size > 1:
            _install_abort_hook(_STATE["comm"])
    return _STATE["comm"].rank


def _install_abort_hook(comm):
    previous = sys.excepthook

    def abort(kind, value, tb):
        # One write with the cause in its first line, then a pause before the abort: MPI_Abort makes
        # mpiexec kill its proxies at once, and whatever they had not yet read from this rank's stderr
        # pipe is lost (CI lost a second write once, and the whole message another time).
        message = str(value).splitlines()
        summary = f"{kind.__name__}: {message[0]}" if message else kind.__name__
        sys.stderr.write(f"lazytensor.distributed: rank {comm.rank} of {comm.size} failed ({summary}); "
                         f"aborting every rank\n" + "".join(traceback.format_exception(kind, value, tb)))
        sys.stderr.flush()
        time.sleep(_FORWARDING_GRACE_S)
        comm.abort(1)
        previous(kind, value, tb)
    sys.excepthook = abort


def launched_by_mpi():
    """Whether this process was started by an MPI launcher (mpiexec) with more than one rank."""
    return _coll.launched_by_mpi()


def is_initialized():
    return _STATE["comm"] is not None


def _comm():
    if _STATE["comm"] is None:
        raise RuntimeError("lazytensor.distributed: call dist.init() first (under mpiexec, or alone for one rank)")
    return _STATE["comm"]


def rank():
    """This process's rank (0 .. world_size() - 1)."""
    return _comm().rank


def world_size():
    return _comm().size


def library():
    """The transport's name and version (e.g. "MPICH Version: 5.0.2")."""
    comm = _comm()
    return getattr(comm, "library", comm.name)


def barrier(group=None, async_op=False, device_ids=None):
    _no_async("barrier", async_op)
    _comm().barrier()


def _no_async(what, async_op):
    if async_op:
        raise NotImplementedError(f"{what}: async_op=True is not supported (collectives complete before they "
                                  f"return)")


def _exchanged(seconds, nbytes):
    _STATE["calls"] += 1
    _STATE["seconds"] += seconds
    _STATE["bytes"] += nbytes


def _timed(exchange):
    """`exchange` (host array -> host array), with its time and bytes added to stats()."""
    def run(array):
        start = now()
        result = exchange(array)
        _exchanged(now() - start, array.nbytes)
        return result
    return run


def _replace(tensor, exchange, label):
    """`tensor` now holds exchange(its value), where its value was (runtime: hostio.exchange)."""
    tensor._node = hostio.exchange(tensor._node, _timed(exchange), label, _comm().name)
    return tensor


def stats():
    """Collectives this process has run: {"calls", "seconds" (exchanging bytes, the realization of the
    values excluded), "bytes" (the values' sizes)}."""
    return {k: _STATE[k] for k in ("calls", "seconds", "bytes")}


def _check(tensor, what):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{what}: expected a lazytensor Tensor, got {type(tensor).__name__}")
    if tensor.requires_grad and tensor._grad_fn is None and is_grad_enabled():
        raise RuntimeError(f"{what}: a leaf that requires grad cannot be changed in place (as in PyTorch); "
                           "call it under lt.no_grad()")


def all_reduce(tensor, op="sum", group=None, async_op=False):
    """Replace `tensor` on every rank by the reduction over ranks ("sum", "mean", "max", "min", or
    ReduceOp's), the same bytes everywhere (fixed rank order, float64 accumulation, one rounding).
    Returns `tensor`."""
    _no_async("all_reduce", async_op)
    if op not in _coll.REDUCE_OPS:
        raise ValueError(f"all_reduce: op must be one of {', '.join(_coll.REDUCE_OPS)}, got {op!r}")
    _check(tensor, "all_reduce")
    if op == "mean" and tensor.dtype.np.kind not in "fc":
        raise TypeError(f"all_reduce: op='mean' needs a float tensor, got {tensor.dtype}")
    comm = _comm()
    return _replace(tensor, lambda array: _coll.all_reduce(comm, array, op), "all_reduce")


def broadcast(tensor, src=0, group=None, async_op=False):
    """Replace `tensor` on every rank by rank `src`'s value. Returns `tensor`."""
    _no_async("broadcast", async_op)
    _check(tensor, "broadcast")
    comm = _comm()
    if not 0 <= src < comm.size:
        raise ValueError(f"broadcast: src must be a rank in 0..{comm.size - 1}, got {src}")
    return _replace(tensor, lambda array: _coll.broadcast(comm, array, src), "broadcast")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Fill `tensor_list` (world_size() tensors shaped like `tensor`) with every rank's `tensor`, in
    rank order, as torch.distributed.all_gather does."""
    _no_async("all_gather", async_op)
    comm = _comm()
    if not isinstance(tensor_list, list) or len(tensor_list) != comm.size:
        raise ValueError(f"all_gather: tensor_list must be a list of {comm.size} tensors (one per rank)")
    _check(tensor, "all_gather")
    for i, out in enumerate(tensor_list):
        if not isinstance(out, Tensor) or out.shape != tensor.shape or out.dtype != tensor.dtype:
            raise ValueError(f"all_gather: tensor_list[{i}] must be a tensor of shape {tensor.shape} and "
                             f"dtype {tensor.dtype}")
    stacked = _replace(tensor.detach(), lambda array: _coll.all_gather(comm, array), "all_gather")
    for i, out in enumerate(tensor_list):
        out._node = stacked[i]._node
    return tensor_list


# ---- PyTorch's names (`import torch.distributed as dist` as written for PyTorch) ---------------------------
class ReduceOp:
    """torch.distributed.ReduceOp: the reductions all_reduce takes."""
    SUM, AVG, MAX, MIN = "sum", "mean", "max", "min"


def is_available():
    return True


def is_torchelastic_launched():
    return False


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """PyTorch's init_process_group over MPI: the job is the one mpiexec started (`backend` "gloo", "nccl" or
    "mpi" is accepted: MPI carries every collective here). A torchrun-style start (WORLD_SIZE above 1 in
    the environment without mpiexec) is refused with the command to use instead."""
    expected = int(os.environ.get("WORLD_SIZE", world_size if world_size and world_size > 0 else 1))
    if expected > 1 and not launched_by_mpi():
        raise RuntimeError(f"init_process_group: WORLD_SIZE={expected} but this process was not started by "
                           f"mpiexec; lazytensor's collectives run over MPI: start the program with "
                           f"`mpiexec -n {expected} python ...` instead of torchrun")
    init()
    if expected > 1 and expected != _comm().size:
        raise RuntimeError(f"init_process_group: WORLD_SIZE={expected} but mpiexec started {_comm().size} ranks")


def get_rank(group=None):
    return rank()


def get_world_size(group=None):
    return world_size()


def get_backend(group=None):
    return "mpi"


def destroy_process_group(group=None):
    """End this process's part in the job (MPI finalizes at exit; later calls need init again)."""
    _comm()
    _STATE["comm"] = None


class DistributedDataParallel:
    """Wraps a Module for data-parallel training: at construction rank 0's parameters (and buffers) are
    broadcast to every rank; after every backward() the gradients of its parameters are averaged over
    ranks, packed into flat buckets of at most `bucket_cap_mb` (one collective per bucket; `comm_seconds`
    sums the time spent exchanging them, the gradients' computation excluded). A parameter
    without a gradient on a rank counts as zeros there, so every rank runs the same collectives.
    `no_sync()` skips the averaging (gradient accumulation: the last backward averages the total), as does
    setting PyTorch's flag `require_backward_grad_sync` to False (nanoGPT's train.py does). Calls and
    other attributes go to the wrapped module (`.module`)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=25, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False):
        # (PyTorch's placement and bucketing options are accepted: devices are chosen by lt.set_device,
        # and an unused parameter counts as a zero gradient on every rank)
        object.__setattr__(self, "module", module)
        object.__setattr__(self, "require_backward_grad_sync", True)
        comm = _comm()
        if comm.size > 1:
            with no_grad():
                for t in list(module.parameters()) + _buffers(module):
                    broadcast(t, 0)
        params = [p for p in module.parameters() if p.requires_grad]
        buckets, current, size = [], [], 0
        cap = bucket_cap_mb * 2 ** 20
        for p in params:  # registration order; one dtype per bucket
            nbytes = p.numel() * p.dtype.np.itemsize
            if current and (size + nbytes > cap or p.dtype != current[0].dtype):
                buckets.append(current)
                current, size = [], 0
            current.append(p)
            size += nbytes
        if current:
            buckets.append(current)
        object.__setattr__(self, "buckets", buckets)
        ref = weakref.ref(self)
        object.__setattr__(self, "_hook", autograd.register_post_backward_hook(
            lambda: ref() is not None and ref()._average()))
        object.__setattr__(self, "comm_seconds", 0.0)

    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def parameters(self, recurse=True):
        return self.module.parameters(recurse)

    def state_dict(self, *args, **kwargs):
        """The wrapped module's state dict, under PyTorch's `module.` prefix."""
        return {f"module.{k}": v for k, v in self.module.state_dict(*args, **kwargs).items()}

    def load_state_dict(self, state, strict=True):
        """A state dict of this wrapper (keys under `module.`) or of the module itself."""
        state = {k[len("module."):] if k.startswith("module.") else k: v for k, v in state.items()}
        return self.module.load_state_dict(state, strict)

    def __getattr__(self, name):
        return getattr(self.module, name)

    def __setattr__(self, name, value):
        if name == "require_backward_grad_sync":
            object.__setattr__(self, name, bool(value))
        else:
            setattr(self.module, name, value)

    @contextlib.contextmanager
    def no_sync(self):
        was = self.require_backward_grad_sync
        object.__setattr__(self, "require_backward_grad_sync", False)
        try:
            yield
        finally:
            object.__setattr__(self, "require_backward_grad_sync", was)

    def _average(self):
        if not self.require_backward_grad_sync or _comm().size == 1:
            return
        before = _STATE["seconds"]
        with no_grad():
            for bucket in self.buckets:
                flat = cat([(p.grad if p.grad is not None else zeros(p.shape, dtype=p.dtype, device=_where(p)))
                            .reshape(-1) for p in bucket])
                all_reduce(flat, "mean")
                offset = 0
                for p in bucket:
                    n = p.numel()
                    p.grad = flat[offset:offset + n].reshape(p.shape)
                    offset += n
        object.__setattr__(self, "comm_seconds", self.comm_seconds + _STATE["seconds"] - before)

    def remove(self):
        """Stop averaging gradients (unregister the backward hook)."""
        self._hook.remove()


def _where(p):
    buf = p._node.buffer
    return buf.backend.name if buf is not None and buf.on_device else None


def _buffers(module):
    return [b for _, m in module.named_modules() for b in m._buffers.values() if b is not None]
