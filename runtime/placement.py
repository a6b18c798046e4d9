"""Placement: every rule that decides which backend of the chain computes a node or a fused group.

Backends only answer what they could run (`kernel_for`, `group_kernel`, `can_fuse`: capabilities, no
side effects); this module asks them and applies the rest: an explicit device (`device=`), a constant
following its consumer's device (runtime/constants.py), the offload mode ("always" takes every kernel
a device has), and under the policy the thresholds by op family and size (runtime/offload_tables.py),
residency (operands already on the device make any size a member), a matrix-vector product's second
offer, the reductions left to the host, Metal's group rule, and the host copy a reshape keeps. The
planner (runtime/planner.py) asks it for every step of a schedule; compiled replays ask it again where
a recorded step cannot be reused as it is.

A device round trip costs microseconds however little it carries, so small work stays on the CPU.
Declining is not an error: the kernel runs on the next backend of the chain.
"""
import contextlib

from ..kernels.ops import OPS
from ..kernels.reference.reduce import BLOCK_SPAN
from .offload_tables import CUDA_THRESHOLDS, METAL_THRESHOLDS  # noqa: F401 (re-exported with the rules)
from .residency import is_param

def family(node, operands):
    """The threshold that applies (the op record's `policy`): matmul, gemv, transcendental, broadcast,
    reduce, fill, copy; elementwise ops over operands of different shapes are broadcasts, and a plain
    matrix transpose is a copy."""
    fam = OPS[node.op].policy
    if fam == "matmul":
        ranks = sorted((len(operands[0].shape), len(operands[1].shape)))
        return "gemv" if ranks == [1, 2] else "matmul"
    if fam == "shaped":
        return "broadcast" if len({b.shape for b in operands if not is_param(b)}) > 1 else "copy"
    if node.op == "permute" and len(node.shape) == 2:
        return "copy"  # a plain matrix transpose: at memory speed on the CPU (axis-list transposes are not)
    return fam


def _matmul_work(node, operands):
    a = operands[0].shape
    k = a[-1]
    return node.size * k


def gemv_matrix(operands):
    """The position of a matrix-vector product's matrix among its operands."""
    return 0 if len(operands[0].shape) == 2 else 1


def _gemv(backend, node, operands, limit, offers):
    matrix = operands[gemv_matrix(operands)]
    if matrix.on_device and matrix.backend is backend:
        return True
    rows_cols = matrix.shape[0] * matrix.shape[1]
    if rows_cols < limit:
        return False
    # First offer: remember the matrix and decline; a second offer of the same (unchanged) value
    # transfers it, after which later calls pay only for the vector. Given `offers` (a planner's list),
    # the offer is noted there instead, and the executor remembers it when the step runs.
    value = matrix.identity
    if backend.gemv_offers.get(id(value)) is value:
        return True
    if offers is None:
        backend.gemv_offers[id(value)] = value
    elif any(v is value for v in offers):
        return True
    else:
        offers.append(value)
    return False


def remember_offer(backend, value):
    """`value`, a matrix a step offered `backend` for the first time, is taken at its next offer."""
    backend.gemv_offers[id(value)] = value


_following = {}  # node id -> device name: a constant computed where its consumer runs (runtime/constants.py)


def explicit(node):
    """A creation op's explicit device (lt.zeros(..., device=...)), the device a constant follows its
    consumer to, or None to let the policy decide."""
    forced = node.attrs.get("device") if isinstance(node.attrs, dict) else None
    return forced if forced is not None else _following.get(node.id)


def followed(node):
    """The device `node` is placed on because it follows its consumer there now, or None."""
    return _following.get(node.id)


@contextlib.contextmanager
def following(node, device_name):
    """Place `node` on device `device_name` while it is computed (a device with no kernel for it
    declines, and the host computes it as usual)."""
    _following[node.id] = device_name
    try:
        yield
    finally:
        del _following[node.id]


def _residency_says_yes(backend, operands):
    """True when every data operand is resident on `backend` (any size is a member), or when running
    elsewhere would download more device-only bytes than running here uploads. A value the evictor
    spilled from `backend` counts as resident there while the device has room for it again (re-homing:
    state evicted under pressure comes back once the pressure is gone, docs/RESIDENCY.md)."""
    upload = download = rehome = 0
    resident = False
    for b in operands:
        if b.shape == () and b.on_host:  # is_param
            continue
        if b.on_device and b.backend is backend:
            resident = True
            if not b.on_host:
                download += b.nbytes
        elif b.home is backend:
            rehome += b.nbytes
        else:
            upload += b.nbytes
    if rehome:
        memory = backend.memory
        if memory.quiet > QUIET_REALIZATIONS and memory.resident_bytes + rehome <= memory.budget:
            resident = True
        else:
            upload += rehome
    if not resident:
        return False
    return upload == 0 or upload <= download  # all resident, or cheaper to upload than to download


# Realizations without an eviction before spilled values count as resident again: more than a training
# step makes, so that a step evicting every time never brings its state back only to spill it again.
QUIET_REALIZATIONS = 8

RESIDENT_REDUCE_SLICES = 32


def _long_serial_fold(node, operands):
    """A reduction with fewer than 32 output slices whose device kernel would be one thread per slice
    folding more than BLOCK_SPAN elements (variances, products, extremes, arg-extremes: float sums and
    means fold in parallel partials instead). Declined even when its operand is resident: one GPU
    thread walking a long slice is slower than downloading it."""
    if node.size >= RESIDENT_REDUCE_SLICES:
        return False
    x = operands[0]
    if x.nbytes // x.dtype.itemsize <= BLOCK_SPAN * max(node.size, 1):
        return False
    return not (node.op in ("sum", "mean") and x.dtype.kind == "f")


EXPANSION = 8


def _expands(backend, node, operands, table):
    """A copy whose result is at least EXPANSION times the bytes it must upload, and as big as a
    broadcast the device takes: a scatter making a cross-entropy or embedding gradient from a batch's
    indices. Run on the host, its result would be uploaded whole for the device kernels that read it."""
    if node.size < table["broadcast"]:
        return False
    upload = sum(b.nbytes for b in operands if not is_param(b) and not (b.on_device and b.backend is backend))
    return upload * EXPANSION <= node.nbytes


def choose(backend, node, operands, offers=None):
    """What `backend` would compute `node` with (its launches, or True), given its operands' Buffers
    or planned stand-ins; None when it should not: it has no kernel for it, the node is placed on
    another device, or the policy leaves it to the next backend (`offers`: see _gemv). A backend
    without an offload mode (NumPy, numba) runs whatever it has a kernel for."""
    if backend.offload is None:
        return backend.kernel_for(node, operands) or None
    forced = explicit(node)
    if forced is not None and forced != backend.name:
        return None
    kernel = backend.kernel_for(node, operands)
    if kernel is None or kernel is False:
        return None
    if backend.offload == "always" or forced == backend.name or _policy_takes(backend, node, operands, offers):
        return kernel
    return None


def _policy_takes(backend, node, operands, offers):
    """Whether the offload policy puts `node` on device `backend`: thresholds, residency, offers."""
    table = backend.thresholds
    fam = family(node, operands)
    if fam == "reduce" and _long_serial_fold(node, operands):
        return False
    if _residency_says_yes(backend, operands):
        return True
    if fam == "copy":
        return _expands(backend, node, operands, table)
    if fam == "matmul":
        return _matmul_work(node, operands) >= table["matmul"]
    if fam == "gemv":
        return _gemv(backend, node, operands, table["gemv"], offers)
    if fam == "reduce":
        if table["reduce_input"] is None:
            return False
        return operands[0].nbytes // operands[0].dtype.itemsize >= table["reduce_input"] and \
            node.size >= table["reduce_slices"]
    return node.size >= table[fam]


def takes_group(backend, group, operands):
    """Whether device `backend` runs a fused elementwise group from its operands' Buffers (or stand-ins):
    it must have a kernel for it; then as one elementwise kernel (resident operands make any size a
    member; else the transcendental or broadcast threshold applies, and equal-shape work stays on the
    CPU)."""
    if not backend.group_kernel(group):
        return False
    if backend.offload == "always":
        return True
    root = group.root
    has_transcendental = any(OPS[ins[0]].policy == "transcendental" for ins in group.recipe[1] if ins[0] in OPS)
    table = backend.thresholds
    if _residency_says_yes(backend, operands):
        return True
    data = [b for b in operands if not is_param(b)]
    if has_transcendental:
        return root.size >= table["transcendental"]
    if len({b.shape for b in data}) > 1:
        return root.size >= table["broadcast"]
    return False


def host_fuser_takes(backend, recipe, root, shapes):
    """Whether host fuser `backend` runs a fused group with operands of `shapes`: it must have a kernel
    for it; Metal, the host fuser with a policy, takes only broadcasts from its threshold up."""
    if not backend.can_fuse(recipe, root, shapes):
        return False
    if backend.offload in (None, "always"):
        return True
    return len(set(shapes)) >= 2 and root.size >= backend.thresholds["broadcast"]


def keeps_host_copy(node, operands):
    """Whether a device result also gets a host copy: a reshape of a value the host also holds is free
    there, so both copies are kept (state BOTH) and e.g. reshaped targets stay readable by host-side
    index checks without a download."""
    return node.op == "reshape" and operands[0].on_host
