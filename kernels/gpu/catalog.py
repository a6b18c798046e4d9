"""One instance of every kernel family, for compile checks (NVRTC for CUDA, clang for MSL) and the
device check scripts: each elementwise op on each dtype it takes, every reduction, the index copies,
fills, the optimizer step, softmax and layer-norm rows and the matrix products."""
from ..ops import OPS
from . import elementwise as ew
from . import index as gidx
from . import layer_norm as glayer_norm
from . import matmul as gmm
from . import optim as gopt
from . import random as grand
from . import reduce as gred
from . import softmax as gsoftmax
from .spec import render

_FLOATS = ("float32", "float64")
_SHAPE = (4, 6, 5)


def _elementwise(has_double):
    out = []
    floats = _FLOATS if has_double else ("float32",)
    st = ew.contiguous_strides(_SHAPE)
    bst = ew.broadcast_strides((6, 1), _SHAPE)
    for op in sorted(ew.OPS):
        if op in ("cast", "where"):
            continue
        record = OPS[op]
        unary = record.arity == 1
        for dt in floats + ("int32", "int64", "bool"):
            ins = [dt] if unary else [dt, dt]
            odt = dt
            if record.dtype == "bool":
                odt = "bool"
            elif record.dtype in ("float", "div"):
                odt = dt if dt in _FLOATS else "float32"
            if not ew.supported(op, ins, odt, has_double):
                continue
            args = ["v0"] if unary else ["v0", "v1"]
            loads = [(d, st if k == 0 else bst, 0) for k, d in enumerate(ins)]
            out.append(ew.strided_map("ew", _SHAPE, (odt, st, 0), loads,
                                      ew.expression(op, ins, odt, args, has_double)))
    for src, dst in (("float32", "int64"), ("int32", "float32"), ("float32", "bool"), ("bool", "float32")):
        out.append(ew.strided_map("ew", _SHAPE, (dst, st, 0), [(src, st, 0)],
                                  ew.expression("cast", [src], dst, ["v0"])))
    out.append(ew.strided_map("ew", _SHAPE, ("float32", st, 0), [("bool", st, 0), ("float32", st, 0)],
                              ew.expression("where", ["bool", "float32", "float32"], "float32",
                                            ["v0", "v1", "(float)s0"]), (("s0", "f"),)))
    out.append(ew.strided_map("tril", (3, 4, 5), ("float32", (20, 5, 1), 0), [("float32", (20, 5, 1), 0)],
                              "((i2 - i1) <= 0LL ? v0 : (float)0)", keep_dims=True))
    out.append(ew.strided_map("copy", (5, 4), ("float32", (4, 1), 0), [("float32", (1, 5), 0)], "v0"))
    return out


def _reductions(has_double):
    out = []
    for op in sorted(gred.OPS):
        for dt in (_FLOATS if has_double else ("float32",)) + ("int64",):
            odt = "int64" if op.startswith("arg") else (dt if dt != "int64" or op in ("amax", "amin") else
                                                         ("int64" if op in ("sum", "prod") else "float32"))
            if gred.supported(op, dt, odt, has_double):
                out.append(gred.axis_reduce(op, _SHAPE, dt, (0, 2), odt, 1, has_double))
    if has_double:  # long sums and means: strided partials, then their fold
        for op, dt in (("sum", "float32"), ("mean", "float64")):
            out += list(gred.blocked_sum(op, (3, 5000, 2), dt, (0, 1), dt)[:2])
    return out


def specs(has_double=True):
    """Representative KernelSpecs of every family (float64 ones only where the dialect has float64)."""
    out = _elementwise(has_double) + _reductions(has_double)
    out += [gidx.take((10, 8), "float32", 12, "int64", 0),
            gidx.take_along((12, 10), "float32", (12, 1), "int64", (12, 1), 1),
            gidx.scatter_take((10, 8), "float32", 12, 0, has_double),
            gidx.scatter_take_along((12, 10), "float32", (12, 1), (12, 1), "int64", 1, has_double),
            gidx.take((10, 8), "float32", 12, "int32", 1, device_check=True),
            gidx.take_along((12, 10), "float32", (12, 1), "int64", (12, 1), 1, device_check=True),
            gidx.scatter_take_along((12, 10), "float32", (12, 1), (12, 1), "int64", 1, has_double, True),
            grand.uniform(1000, "float32"), grand.randint(1000, "int64", -5, 17)]
    out.append(gmm.matmul((3,), 7, 9, 5, (63,), (0,), "float32", has_double))
    if has_double:
        out += [grand.uniform(1000, "float64"), grand.normal(1000, "float32"), grand.normal(1000, "float64"),
                gopt.adamw(1000, "float32", 0.9, 0.999, 1e-8, 0.01),
                gopt.adamw(1000, "float32", 0.9, 0.999, 1e-8, 0.01, "buffer"),
                gopt.adamw_in_place(1000, "float64", 0.9, 0.999, 1e-8, 0.01, "scalar"),
                gmm.matmul((2, 3), 8, 4, 6, (96, 32), (0, 24), "float64")]
        out += [gsoftmax.along_axis(op, _SHAPE, axis, dt) for op in sorted(gsoftmax.OPS)
                for axis, dt in ((2, "float32"), (1, "float64"))]
        out += [glayer_norm.rows(op, 6, 20, dt, 1e-5) for op in sorted(glayer_norm.OPS) for dt in _FLOATS]
        out += [spec for dt in _FLOATS for spec in gopt.sum_of_squares((12, 1, 5000), dt)[:2]]
    return out


def source(profile, extra=()):
    """One translation unit holding the prelude and every catalog kernel (each once) in `profile`'s dialect."""
    seen, parts = set(), [profile.prelude()]
    for spec in specs(profile.has_double):
        if spec.name not in seen:
            seen.add(spec.name)
            parts.append(render(spec, profile, prelude=False))
    return "\n".join(parts + list(extra))
