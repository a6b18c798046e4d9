"""The offload policy: which kernels a device accepts, by op family and size, with one table per backend.

A device round trip costs microseconds however little it carries, so small work stays on the CPU.
Operands already resident on the device make any size a member (the alternative is a download).
Declining is not an error: the kernel runs on the next backend of the chain.

The CUDA values are the measurements of the system this design comes from (NVIDIA GB10) and still
have to be re-measured on our own hardware; the virtual device uses the CUDA table so that its
transfer log rehearses a CUDA run. Metal's values are the seed's where it gives them; `fill` is not
measured for Metal and is scaled by its ~5x higher round trip.
"""
import contextlib

from ..kernels.ops import OPS
from ..kernels.reference.reduce import BLOCK_SPAN

CUDA_THRESHOLDS = {
    "matmul": 131072,          # n*m*p (batch*n*m*p for stacked products), ~51^3
    "gemv": 131072,            # rows*cols of a matrix-vector product's matrix, once it is resident
    "transcendental": 16384,   # elements of exp/log/tanh/... and what is built on them
    "broadcast": 32768,        # result elements of broadcasting binary ops, expands, axis-list transposes
    "reduce_input": 131072,    # input elements of an axis reduction ...
    "reduce_slices": 256,      # ... and its number of output slices
    "fill": 8192,              # elements generated on the device (RNG fills, full/arange/linspace/eye)
}
# Metal takes no reduction under the policy (None): its float32 folds cannot give the float64 fold's
# bits, and the seed measured amax/amin there as a tie. Nothing is resident on Metal, so no operand
# ever makes one a member either; offload="always" still runs them (Kahan-compensated, docs/NUMERICS.md).
METAL_THRESHOLDS = {
    "matmul": 4194304, "gemv": 2097152, "transcendental": 131072, "broadcast": 262144,
    "reduce_input": None, "reduce_slices": None, "fill": 40960,
}


def is_param(buf):
    """A 0-d value already on the host travels as a kernel parameter, not as a copy."""
    return buf.shape == () and buf.on_host


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


def _gemv(backend, node, operands, limit, remember):
    matrix = operands[0] if len(operands[0].shape) == 2 else operands[1]
    if matrix.on_device and matrix.backend is backend:
        return True
    rows_cols = matrix.shape[0] * matrix.shape[1]
    if rows_cols < limit:
        return False
    # First offer: remember the matrix and decline; a second offer of the same (unchanged) value
    # transfers it, after which later calls pay only for the vector. A plan (remember=False) asks
    # without remembering.
    value = matrix.identity
    if backend.gemv_offers.get(id(value)) is value:
        return True
    if remember:
        backend.gemv_offers[id(value)] = value
    return False


_following = {}  # node id -> device name: a constant computed where its consumer runs (runtime/constants.py)


def placement(node):
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
    elsewhere would download more device-only bytes than running here uploads."""
    data = [b for b in operands if not is_param(b)]
    resident = [b for b in data if b.on_device and b.backend is backend]
    if data and len(resident) == len(data):
        return True
    if resident:
        upload = sum(b.nbytes for b in data if not (b.on_device and b.backend is backend))
        download = sum(b.nbytes for b in resident if not b.on_host)
        return upload <= download
    return False


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


def accepts(backend, node, operands, remember=True):
    """Whether `backend` (a device) should run `node`, given its operands' buffers (or their planned
    stand-ins); `remember=False` asks without recording a first gemv offer."""
    forced = placement(node)
    if forced is not None:
        return forced == backend.name
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
        return _gemv(backend, node, operands, table["gemv"], remember)
    if fam == "reduce":
        if table["reduce_input"] is None:
            return False
        return operands[0].nbytes // operands[0].dtype.itemsize >= table["reduce_input"] and \
            node.size >= table["reduce_slices"]
    return node.size >= table[fam]


def accepts_group(backend, root, has_transcendental, operands):
    """Whether a device runs a fused elementwise group producing `root` from operand buffers: like one
    elementwise kernel (resident operands make any size a member; else the transcendental or
    broadcast threshold applies, and equal-shape work stays on the CPU)."""
    table = backend.thresholds
    if _residency_says_yes(backend, operands):
        return True
    data = [b for b in operands if not is_param(b)]
    if has_transcendental:
        return root.size >= table["transcendental"]
    if len({b.shape for b in data}) > 1:
        return root.size >= table["broadcast"]
    return False
