"""The Optimizer base (PyTorch's parameter groups and state_dict), SGD with momentum, Adam, AdamW, and a
cosine learning-rate schedule with linear warmup (more schedules: lr_scheduler.py; more optimizers:
adaptive.py, lbfgs.py). A step builds the
updates lazily, then realizes the new parameters and state together, so they stay wherever the
parameters live."""
import functools
import math
import weakref

import numpy as np

from .. import compiled, dtypes, grad_mode
from ..runtime import devices
from ..runtime.hostio import host_view_node
from ..creation import tensor, zeros_like
from ..elementwise import scalar
from ..evaluation import realize
from ..indexing import row
from ..tensor import Tensor
from . import lr_scheduler


_UNWIDENED = (dtypes.float32.np, dtypes.float64.np)  # float16/bfloat16 products are rounded to themselves
# On the CPU, AdamW updates parameters up to this size together, one kernel for all (adamw_many): a kernel
# of its own for each costs more in per-call overhead than its work (a bias: 64 elements). Bigger ones,
# and every parameter on a device, keep a kernel each (runtime/replay/device_runner.py updates those in place).
TOGETHER_MAX_ELEMENTS = 1 << 14


def _scaled_gradient(grad):
    """(gradient, 0-d factor) when `grad` is a pending product of the two in float32 or float64, as
    clip_grad_norm_ leaves it (the update kernel then multiplies them with the same rounding, and the
    product is computed only if something reads `.grad`); else (grad, None)."""
    node = grad._node
    if node.op != "mul" or node.buffer is not None or node.dtype not in _UNWIDENED:
        return grad, None
    for values, factor in (node.inputs, node.inputs[::-1]):
        if factor.shape == () and values.shape == node.shape and values.dtype == factor.dtype == node.dtype:
            return Tensor(values), Tensor(factor)
    return grad, None


def _host_scalar(value):
    """A 0-d float64 value on the host: it reaches a device kernel as a parameter, not as a copy."""
    return tensor(np.float64(value), dtype=dtypes.float64)


def closure_step(step):
    """PyTorch's `step(closure=None)`: the closure (which recomputes the loss and its gradients) runs first,
    with gradients on, then the update; returns the closure's loss (None without one)."""
    @functools.wraps(step)
    def wrapped(self, closure=None):
        loss = None
        if closure is not None:
            with grad_mode.enable_grad():
                loss = closure()
        step(self)
        return loss
    return wrapped


class Optimizer:
    """Holds parameter groups (lists of dicts, as PyTorch takes them) and per-parameter state."""

    def __init__(self, params, defaults):
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.defaults = defaults
        self.param_groups = []
        for group in groups:
            self.add_param_group(group)
        self.state = {}

    def _params(self):
        return [p for g in self.param_groups for p in g["params"]]

    def add_param_group(self, param_group):
        """Add a group (a dict with "params"; options not given take the defaults)."""
        params = param_group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        unknown = set(param_group) - set(self.defaults) - {"params"}
        if unknown:
            raise ValueError(f"{type(self).__name__}: unknown options {sorted(unknown)} in a parameter group")
        held = {id(p) for p in self._params()}
        for p in params:
            if not isinstance(p, Tensor) or not p.requires_grad:
                raise TypeError(f"{type(self).__name__}: every parameter must be a tensor that requires grad")
            if id(p) in held:
                raise ValueError(f"{type(self).__name__}: a parameter appears in more than one group")
            held.add(id(p))
        self.param_groups.append({**self.defaults, **param_group, "params": params})

    def _lr(self, group, dtype):
        """The group's lr as a 0-d value that lt.jit re-reads from the group at each replay."""
        lr = scalar(group["lr"], dtype)
        compiled.dynamic(lr, lambda: group["lr"])
        return lr

    def zero_grad(self, set_to_none=True):
        for p in self._params():
            p.grad = None

    def _realize(self):
        targets = []
        for p in self._params():
            targets.append(p)
            targets.extend(v for v in self.state.get(id(p), {}).values() if isinstance(v, Tensor))
        realize(*targets)

    def state_dict(self):
        """{"state": {index: {...}}, "param_groups": [{hyperparameters, "params": [index, ...]}]}."""
        index = {id(p): i for i, p in enumerate(self._params())}
        state = {index[k]: dict(v) for k, v in self.state.items() if k in index}
        groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [index[id(p)] for p in g["params"]]}
                  for g in self.param_groups]
        return {"state": state, "param_groups": groups}

    # The per-parameter state entries a subclass keeps: (names of tensors, names of counts).
    STATE_TENSORS, STATE_COUNTS = (), ()
    # Options PyTorch saves in a group that this optimizer computes with one fixed value.
    FIXED_OPTIONS = {}

    def _fixed_option(self, name, value):
        """Whether `name` is an option PyTorch saves in its parameter groups that this optimizer does not
        keep: how an update runs (foreach, fused, capturable: lazytensor picks its kernels), or one it
        computes with a fixed value. ValueError when the saved value asks for what it does not compute."""
        if name in ("foreach", "fused", "capturable"):
            return True
        fixed = dict(self.FIXED_OPTIONS, differentiable=False)
        if name not in fixed:
            return False
        if value != fixed[name]:
            raise ValueError(f"load_state_dict: the saved parameter group has {name}={value!r}; lazytensor's "
                             f"{type(self).__name__} computes {name}={fixed[name]!r}")
        return True

    def load_state_dict(self, state_dict):
        """Take the hyperparameters and per-parameter state of `state_dict` (what `state_dict()` gave,
        possibly through a file). ValueError, naming the entry, for one that does not fit this
        optimizer; nothing is changed then."""
        params = self._params()
        if not isinstance(state_dict, dict) or not isinstance(state_dict.get("param_groups"), (list, tuple)) \
                or not isinstance(state_dict.get("state"), dict):
            raise ValueError("load_state_dict: expected {'state': {...}, 'param_groups': [...]}")
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(
                not isinstance(a, dict) or not isinstance(a.get("params"), (list, tuple))
                or len(a["params"]) != len(b["params"]) for a, b in zip(groups, self.param_groups)):
            raise ValueError("load_state_dict: the saved parameter groups do not match this optimizer's")
        hyper = [{k: _hyperparameter(k, v, own) for k, v in saved.items()
                  if k != "params" and (k in own or not self._fixed_option(k, v))}
                 for saved, own in zip(groups, self.param_groups)]
        state = {}
        for i, st in state_dict["state"].items():
            try:
                p = params[int(i)]
            except (TypeError, ValueError, IndexError):
                raise ValueError(f"load_state_dict: state for parameter {i!r}, of {len(params)}") from None
            if not isinstance(st, dict):
                raise ValueError(f"load_state_dict: the state of parameter {i} is not a dict")
            state[id(p)] = self._state_entry(i, st, p)
        for saved, own in zip(hyper, self.param_groups):
            own.update(saved)
        self.state = state

    def _expected_state(self, p):
        """The entries of parameter `p`'s state (none declared: any)."""
        return set(self.STATE_TENSORS) | set(self.STATE_COUNTS)

    def _state_entry(self, i, st, p):
        """The state of parameter number `i` (`p`) from its saved entry `st`, checked."""
        expected = self._expected_state(p)
        if expected and (set(st) - expected or (self.STATE_COUNTS and set(st) != expected)):
            raise ValueError(f"load_state_dict: parameter {i}'s state has entries {sorted(map(str, st))}; "
                             f"{type(self).__name__} keeps {sorted(expected)}")
        entry = {}
        for k, v in st.items():
            if not expected and not isinstance(v, (Tensor, np.ndarray)):
                entry[k] = v  # an optimizer that declares no state: kept as given
                continue
            if k in self.STATE_COUNTS:
                entry[k] = _count(k, i, v)
                continue
            if not isinstance(v, (Tensor, np.ndarray)) or (isinstance(v, np.ndarray) and v.dtype.kind not in "fiu"):
                raise ValueError(f"load_state_dict: state {k!r} of parameter {i} is not an array")
            if tuple(v.shape) != p.shape:
                raise ValueError(f"load_state_dict: state {k!r} of parameter {i} has shape "
                                 f"{tuple(v.shape)}, the parameter {p.shape}")
            # a tensor of its own: a step replaces its value in place (the saved one stays)
            entry[k] = tensor(v, dtype=p.dtype) if isinstance(v, np.ndarray) else v.detach()
        return entry


def _count(name, i, value):
    """A saved count (Adam's step): an int, or a 0-d tensor or array holding a whole number (PyTorch saves
    its step as a float tensor)."""
    if isinstance(value, (Tensor, np.ndarray)) and not value.shape:
        as_float = float(value.item())
        if as_float.is_integer():
            value = int(as_float)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"load_state_dict: state {name!r} of parameter {i} is {value!r}, not a count")
    return int(value)


def _hyperparameter(name, value, group):
    """A saved hyperparameter, checked to be of the kind this optimizer's `group` holds under `name` (a
    number, or a pair of numbers such as betas)."""
    def number(v):
        return isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_)) and math.isfinite(v)
    if name not in group:
        raise ValueError(f"load_state_dict: unknown hyperparameter {name!r} in a saved parameter group")
    own = group[name]
    if isinstance(own, tuple):
        if isinstance(value, (list, tuple)) and len(value) == len(own) and all(number(v) for v in value):
            return tuple(value)
    elif number(own) and number(value):
        return value
    elif type(value) is type(own):
        return value
    raise ValueError(f"load_state_dict: hyperparameter {name!r} is {value!r}; this optimizer holds {own!r}")


class ElementwiseOptimizer(Optimizer):
    """An optimizer whose update of each parameter is `_update(p, g, state, group, lr)`: the new value
    from the gradient (negated with `maximize`, plus weight decay), the state made by `_initial_state`
    at the first step, and the group's lr as a 0-d value; one realization for every update of a step."""

    @closure_step
    @grad_mode.no_grad()
    def step(self):
        for group in self.param_groups:
            lr = None
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = -p.grad if group.get("maximize") else p.grad
                if group["weight_decay"]:
                    g = g + p * group["weight_decay"]
                st = self.state.get(id(p))
                if st is None:
                    st = self.state[id(p)] = self._initial_state(p, group)
                if lr is None or lr.dtype != p.dtype:
                    lr = self._lr(group, p.dtype)
                p._node = self._update(p, g, st, group, lr)._node
        self._realize()

    @staticmethod
    def _set(state, key, value):
        state[key]._node = value._node  # the same tensor: lt.jit state


def implementation_flags(name, foreach=None, fused=None, capturable=False, differentiable=False):
    """PyTorch's flags choosing how an optimizer's update runs (`foreach`, `fused`, `capturable`): accepted,
    since lazytensor picks its kernels itself (each update is one fused node; small ones share a kernel).
    `differentiable=True` (gradients through the update) is refused."""
    if differentiable:
        raise NotImplementedError(f"{name}: differentiable=True (gradients through the update) is not supported")


class SGD(ElementwiseOptimizer):
    """p <- p - lr * (g + wd p), with momentum buf <- momentum buf + (1 - dampening) g (the first step:
    buf = g) and Nesterov's g + momentum buf, as PyTorch."""

    STATE_TENSORS = ("momentum_buffer",)

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        implementation_flags("SGD", foreach, fused, differentiable=differentiable)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum needs a momentum and zero dampening")
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize})

    def _initial_state(self, p, group):
        return {}

    def _update(self, p, g, st, group, lr):
        if group["momentum"]:
            buf = st.get("momentum_buffer")
            if buf is None:
                buf = st["momentum_buffer"] = g.detach()
            else:
                step = g if not group["dampening"] else g * (1.0 - group["dampening"])
                buf._node = (buf * group["momentum"] + step)._node  # the same tensor: lt.jit state
            g = g + buf * group["momentum"] if group["nesterov"] else buf
        return p - g * lr


class AdamW(Optimizer):
    """Adam with decoupled weight decay (PyTorch's defaults); each parameter's update is one fused node."""

    decoupled = True  # weight decay shrinks the parameter (AdamW), not added to the gradient (Adam)
    STATE_TENSORS, STATE_COUNTS = ("exp_avg", "exp_avg_sq"), ("step",)
    FIXED_OPTIONS = {"amsgrad": False, "maximize": False, "decoupled_weight_decay": True}

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        implementation_flags(type(self).__name__, foreach, fused, capturable, differentiable)
        if amsgrad or maximize:
            raise NotImplementedError(f"{type(self).__name__}: amsgrad=True and maximize=True are not supported")
        if lr < 0 or eps < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"{type(self).__name__}: invalid lr={lr}, betas={betas} or eps={eps}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay})

    @closure_step
    @grad_mode.no_grad()
    def step(self):
        updates, scalars, stepped = [], {}, []
        together = {}  # small parameters updated by one kernel: (group, step, dtype, scale) -> their entries
        host_only = devices.chain()[0].is_host

        def step_scalar(key, value, follow):  # one 0-d leaf per distinct value in a step, not one per parameter
            if key not in scalars:
                scalars[key] = _host_scalar(value)
                compiled.dynamic(scalars[key], follow)  # lt.jit recomputes it at each replay
            return scalars[key]
        for index, group in enumerate(self.param_groups):
            b1, b2 = group["betas"]
            wd = group["weight_decay"]
            attrs = {"beta1": b1, "beta2": b2, "eps": group["eps"], "weight_decay": wd if self.decoupled else 0.0}
            lr = step_scalar(("lr", id(group)), group["lr"], lambda group=group: group["lr"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                if self.decoupled or wd == 0:
                    grad, scale = _scaled_gradient(p.grad)
                else:
                    grad, scale = p.grad + p * wd, None
                st = self.state.get(id(p))
                if st is None:
                    st = self.state[id(p)] = {"step": 0, "exp_avg": zeros_like(p), "exp_avg_sq": zeros_like(p)}
                st["step"] += 1
                stepped.append(st)
                bias1 = step_scalar(("b1", b1, st["step"]), 1 - b1 ** st["step"],
                                    lambda st=st, b1=b1: 1 - b1 ** st["step"])
                bias2 = step_scalar(("b2", b2, st["step"]), 1 - b2 ** st["step"],
                                    lambda st=st, b2=b2: 1 - b2 ** st["step"])
                shared = (lr, bias1, bias2) + (() if scale is None else (scale,))
                if host_only and p._node.size <= TOGETHER_MAX_ELEMENTS and p._node.dtype in _UNWIDENED:
                    key = (index, st["step"], p._node.dtype, None if scale is None else scale._node)
                    together.setdefault(key, (attrs, shared, []))[2].append((p, st, grad))
                    continue
                updates.append(([(p, st)], _update([(p, st, grad)], attrs, shared)))
        for attrs, shared, entries in together.values():
            updates.append(([(p, st) for p, st, _ in entries], _update(entries, attrs, shared)))
        compiled.on_replay(lambda: _advance(stepped))
        # One scheduler run for the whole step (forward, backward, updates); then (p, m, v) are views
        # of each update's result: on the host free views, else three slices realized together.
        # The parameter and its moments keep their tensor objects (lt.jit replays update them).
        # Where a device may run an update, they point at their slices before that run: the old values
        # are then held by their update alone and freed as it runs, not all kept until every update has
        # run (which held the optimizer state twice over at the step's end). A step that raises leaves
        # each parameter whose update had not run as it was (weak references: held, they would stay).
        old = []
        if not host_only:
            for members, packed in updates:
                (p, st), = members
                for k, t in enumerate((p, st["exp_avg"], st["exp_avg_sq"])):
                    old.append((t, weakref.ref(t._node)))
                    t._node = row(packed, k)._node
        try:
            realize(*(packed for _, packed in updates))
        except BaseException:
            for t, ref in old:
                node = ref()
                if node is not None:
                    t._node = node
            raise
        old = None
        pending = []
        for members, packed in updates:
            buf = packed._node.buffer
            if packed._node.op == "adamw_many":  # made only when every kernel runs on the host
                start = 0
                for p, st in members:
                    cols = slice(start, start + p._node.size)
                    start = cols.stop
                    p._node = host_view_node(packed._node, (0, cols), p.shape)
                    st["exp_avg"]._node = host_view_node(packed._node, (1, cols), p.shape)
                    st["exp_avg_sq"]._node = host_view_node(packed._node, (2, cols), p.shape)
                continue
            (p, st), = members
            if buf.on_host and not buf.on_device:  # a device copy stays in use
                p._node = host_view_node(packed._node, 0)
                st["exp_avg"]._node = host_view_node(packed._node, 1)
                st["exp_avg_sq"]._node = host_view_node(packed._node, 2)
            else:
                if host_only:
                    p._node = row(packed, 0)._node
                    st["exp_avg"]._node, st["exp_avg_sq"]._node = row(packed, 1)._node, row(packed, 2)._node
                pending += [p, st["exp_avg"], st["exp_avg_sq"]]
        if pending:
            updates = packed = buf = None  # each update's result then goes once its three slices are made
            realize(*pending)


def _update(entries, attrs, shared):
    """The node updating the parameters of `entries` ((p, state, gradient) each) with the 0-d values
    `shared` (lr, bias1, bias2[, scale]): `adamw` for one parameter, `adamw_many` for several."""
    if len(entries) == 1:
        (p, st, grad), = entries
        inputs = (p, grad, st["exp_avg"], st["exp_avg_sq"]) + shared
        return Tensor._from_op("adamw", inputs, attrs, (3,) + p.shape, p.dtype)
    columns = [(p, grad, st["exp_avg"], st["exp_avg_sq"]) for p, st, grad in entries]
    inputs = tuple(t for i in range(4) for t in (c[i] for c in columns)) + shared
    total = sum(p._node.size for p, _, _ in entries)
    p = entries[0][0]
    return Tensor._from_op("adamw_many", inputs, {**attrs, "count": len(entries)}, (3, total), p.dtype)


def _advance(states):
    """A replayed step's Python side: every updated parameter's step count goes up by one."""
    for st in states:
        st["step"] += 1

    def undo():
        for st in states:
            st["step"] -= 1
    return undo


class Adam(AdamW):
    """Adam (PyTorch's defaults): weight decay, if any, is added to the gradient (L2), unlike AdamW."""

    decoupled = False
    FIXED_OPTIONS = {"amsgrad": False, "maximize": False, "decoupled_weight_decay": False}

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, foreach=foreach,
                         capturable=capturable, differentiable=differentiable, fused=fused)


class CosineWarmupLR(lr_scheduler.LRScheduler):
    """lr(step) = base * step / warmup during warmup, then cosine from base down to min_lr at total_steps."""

    def __init__(self, optimizer, warmup_steps, total_steps, min_lr=0.0):
        if total_steps <= 0 or warmup_steps < 0:
            raise ValueError("CosineWarmupLR: total_steps must be positive and warmup_steps non-negative")
        self.warmup, self.total, self.min_lr = warmup_steps, total_steps, min_lr
        super().__init__(optimizer)

    def closed_form_lr(self, base, step):
        if step < self.warmup:
            return base * (step + 1) / self.warmup
        progress = min(1.0, (step - self.warmup) / max(1, self.total - self.warmup))
        return self.min_lr + 0.5 * (base - self.min_lr) * (1.0 + math.cos(math.pi * progress))
