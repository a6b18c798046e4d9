"""Every LAZYTENSOR_* environment variable: one table, one parser each, read in this module only.

A variable is read when the setting is needed, not once at import, so a program (or a test) may set one
before the device it governs starts. A value that cannot be parsed raises ValueError naming the variable
and what it accepts. The kernels package never reads the environment: the settings it needs (the cache
folder, the NVRTC library, the CUDA matmul variant) reach it through `kernels.settings`, which this
module fills in. `markdown_table()` renders the table the README shows (a test keeps the two equal).
"""
import dataclasses
import difflib
import numbers
import os
import re
import sys
import warnings

from ..kernels import settings as _kernel_settings

_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")


def _switch(name, raw):
    value = raw.strip().lower()
    if value in _OFF:
        return False
    if value in _ON:
        return True
    raise ValueError(f"{name} must be 1 or 0 (on/off, true/false, yes/no), got {raw!r}")


def _choice(*choices):
    """A parser accepting one of `choices` (a function returning them is read when a value is parsed)."""
    def parse(name, raw):
        value = raw.strip().lower()
        allowed = choices[0]() if callable(choices[0]) else choices
        if value not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {raw!r}")
        return value
    return parse


def _count(minimum):
    def parse(name, raw):
        try:
            value = int(raw.strip())
        except ValueError:
            value = None
        if value is None or value < minimum:
            kind = "a positive" if minimum == 1 else "a non-negative"
            raise ValueError(f"{name} must be {kind} integer, got {raw!r}")
        return value
    return parse


_UNITS = {"": 1, "b": 1, "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12,
          "k": 2 ** 10, "m": 2 ** 20, "g": 2 ** 30, "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30,
          "tib": 2 ** 40}


def parse_bytes(value):
    """512MB, 1.5GiB, 64k, 1000000 -> bytes (KB/MB/GB are powers of 1000; K/M/G and KiB/MiB/GiB of 1024)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        n = int(value)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(value))
        if not m or m.group(2).lower() not in _UNITS:
            raise ValueError(f"cannot read {value!r} as a number of bytes; use e.g. 512MB, 2GiB or 1048576")
        n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n < 0:
        raise ValueError(f"a memory size cannot be negative, got {value!r}")
    return n


def _bytes(name, raw):
    try:
        return parse_bytes(raw)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _text(name, raw):
    return raw.strip()


def offload_mode(device, value):
    """A device's offload option ("policy" or "always"), checked once for every device."""
    mode = str(value).strip().lower()
    if mode not in ("policy", "always"):
        raise ValueError(f"{device} offload must be 'policy' or 'always', got {value!r}")
    return mode


@dataclasses.dataclass(frozen=True)
class Variable:
    """One environment variable: its name, accepted values, default (None: computed), effect, parser."""
    name: str
    values: str
    default: object
    shown_default: str
    effect: str
    parse: object


def _offload(device):
    return Variable(f"LAZYTENSOR_{device.upper()}_OFFLOAD", "`policy`, `always`", "policy", "`policy`",
                    f"which kernels the {device} device takes: by the offload policy, or every one it can run",
                    _choice("policy", "always"))


_DEVICE_NAMES = ["auto", "cpu"]  # and every device runtime/devices.py registers


def allow_device(name):
    """Accept `name` as a value of LAZYTENSOR_DEVICE (called when a device is registered)."""
    if name not in _DEVICE_NAMES:
        _DEVICE_NAMES.append(name)


def forbid_device(name):
    """No longer accept `name` (its device was unregistered); auto and cpu always stay."""
    if name in _DEVICE_NAMES[2:]:
        _DEVICE_NAMES.remove(name)


VARIABLES = (
    Variable("LAZYTENSOR_DEVICE",
             "`auto`, `cpu`, `virtual`, `cuda`, `metal`, or a name given to `lt.register_device`", "auto",
             "`auto`", "the device kernels run on (`auto`: CUDA, else Metal, else the CPU)",
             _choice(lambda: _DEVICE_NAMES)),
    Variable("LAZYTENSOR_MEMORY_BUDGET", "bytes: `512MB`, `2GiB`, `1048576`", None, "a quarter of free memory",
             "bytes a device may keep resident (blocks cached for reuse included)", _bytes),
    Variable("LAZYTENSOR_JIT", "`1`, `0`", True, "`1`", "`0` turns the numba backend off (NumPy runs everything)",
             _switch),
    Variable("LAZYTENSOR_FUSE", "`1`, `0`", True, "`1`", "`0` turns elementwise fusion off", _switch),
    Variable("LAZYTENSOR_REPLAY", "`1`, `0`", True, "`1`",
             "`0` turns off replaying repeated CPU realizations (an eager training step's) from a recorded "
             "plan, and repeated backward passes from a recording", _switch),
    Variable("LAZYTENSOR_NUM_THREADS", "a positive integer", None,
             "`OMP_NUM_THREADS`, else all cores (divided among the ranks mpiexec started on the machine)",
             "CPU threads for host kernels (`lt.set_num_threads` overrides)", _count(1)),
    Variable("LAZYTENSOR_CUDA_DRIVER", "`auto`, `pycuda`, `cuda-bindings`, `emulated`", "auto", "`auto`",
             "the CUDA binding; `emulated` runs the kernels as C on the CPU (tests only)",
             _choice("auto", "pycuda", "cuda-bindings", "emulated")),
    _offload("cuda"),
    _offload("virtual"),
    _offload("metal"),
    Variable("LAZYTENSOR_VIRTUAL_MEMORY", "bytes", 2 ** 30, "`1GiB`",
             "the arena of the virtual device and of the emulated CUDA driver", _bytes),
    Variable("LAZYTENSOR_LOG_RECORDS", "a non-negative integer", 10000, "`10000`",
             "copy (and kernel) records the transfer log keeps; totals stay exact", _count(0)),
    Variable("LAZYTENSOR_HOST_CACHE", "bytes", 2 ** 30, "`1GiB`",
             "idle memory the CPU kernels keep for their next results (`0`: none; `lt.cpu.empty_cache()` frees it)",
             _bytes),
    Variable("LAZYTENSOR_MALLOC", "`tuned`, `default`", "", "unset",
             "`tuned`: apply `lt.tune_host_malloc()` at the first computation (not needed for speed: the CPU "
             "kernels keep their results' memory themselves); `default`: leave malloc alone",
             _choice("tuned", "default")),
    Variable("LAZYTENSOR_CACHE_DIR", "a folder", None, "`~/.cache/lazytensor`",
             "where compiled kernels (numba, fused, CUDA) are kept between runs", _text),
    Variable("LAZYTENSOR_NVRTC", "a file", None, "found in NVIDIA's wheels or a CUDA install",
             "the NVRTC library that compiles CUDA kernels", _text),
    Variable("LAZYTENSOR_CUDA_MATMUL", "`tiled`, `naive`", "tiled", "`tiled`",
             "the float32 CUDA matrix product: shared-memory tiles, or one thread per output", _choice("tiled", "naive")),
    Variable("LAZYTENSOR_HOST_BLAS", "`auto`, `numpy`, `blis`, `mkl`", "auto", "`auto`",
             "who computes float products on the CPU: NumPy's BLAS, BLIS (float32 products of 2^18 to 2^25 "
             "multiply-adds), MKL where its wheel is installed (every product), or the fastest on this machine "
             "(measured once, kept in the cache folder)",
             _choice("auto", "numpy", "blis", "mkl")),
    Variable("LAZYTENSOR_WIDE_VECTORS", "`1` or `0`", True, "`1`",
             "on CPUs with AVX-512, compile numba's loops 512 bits wide (LLVM prefers 256 on Intel); read when the "
             "kernels load, and it applies to every numba function of the process", _switch),
)
_BY_NAME = {v.name: v for v in VARIABLES}


def get(name):
    """The parsed value of `name` now: its setting in the environment, else its default (None where
    the default is computed by the reader, e.g. the memory budget)."""
    raw = os.environ.get(name)
    if raw is None:
        return _BY_NAME[name].default
    value = _parsed.get((name, raw), _parsed)
    if value is _parsed:  # not parsed yet (a bad value is parsed, and raises, at every read)
        var = _BY_NAME[name]
        value = var.default if not raw.strip() else var.parse(name, raw)
        if len(_parsed) < 256:
            _parsed[(name, raw)] = value
    return value


_parsed = {}  # (name, raw text) -> its parsed value: settings are read per realization


def check_all():
    """Parse every variable set in the environment now; ValueError (naming the first bad one) if any
    cannot be read. A program that should fail before it starts working calls this first."""
    for var in VARIABLES:
        get(var.name)


class UnknownSettingWarning(UserWarning):
    """A LAZYTENSOR_* variable is set that lazytensor does not read (a misspelt name)."""


def unknown_variables():
    """[(name, the closest known name or None)] for each LAZYTENSOR_* variable set in the environment
    that no setting reads (except the test suite's own, whose names go on with TEST_)."""
    out = []
    for name in sorted(os.environ):
        if name.startswith("LAZYTENSOR_") and name not in _BY_NAME and not name[11:].startswith("TEST_"):
            close = difflib.get_close_matches(name, list(_BY_NAME), n=1, cutoff=0.6)
            out.append((name, close[0] if close else None))
    return out


def check_at_start():
    """When the engine starts (its first computation): ValueError for a variable whose value it cannot
    use, whether or not this program will read it, and one UnknownSettingWarning for each unknown name."""
    check_all()
    for name, close in unknown_variables():
        hint = f"; did you mean {close}?" if close else f"; the settings are {', '.join(_BY_NAME)}"
        warnings.warn(f"{name} is not a lazytensor setting and is ignored{hint}", UnknownSettingWarning,
                      stacklevel=_user_stacklevel())


def _user_stacklevel():
    """warnings.warn's stacklevel that names the first caller outside lazytensor (the user's line)."""
    frame, level = sys._getframe(2), 2
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith("lazytensor"):
        frame, level = frame.f_back, level + 1
    return level


def default_cache_dir():
    """LAZYTENSOR_CACHE_DIR, else $XDG_CACHE_HOME/lazytensor, else ~/.cache/lazytensor."""
    return get("LAZYTENSOR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "lazytensor")


def markdown_table():
    """The README's table of variables."""
    rows = ["| variable | values | default | what it changes |", "|---|---|---|---|"]
    rows += [f"| `{v.name}` | {v.values} | {v.shown_default} | {v.effect} |" for v in VARIABLES]
    return "\n".join(rows)


_kernel_settings.provide(cache_dir=default_cache_dir, nvrtc_library=lambda: get("LAZYTENSOR_NVRTC"),
                         cuda_matmul=lambda: get("LAZYTENSOR_CUDA_MATMUL"),
                         host_blas=lambda: get("LAZYTENSOR_HOST_BLAS"),
                         wide_vectors=lambda: get("LAZYTENSOR_WIDE_VECTORS"),
                         host_cache_bytes=lambda: get("LAZYTENSOR_HOST_CACHE"))
