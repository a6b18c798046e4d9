"""The learning-rate schedulers that drive others or follow a metric, in PyTorch's shape: SequentialLR
(one scheduler after another at milestones), ChainedScheduler (several stepped together, their factors
multiplied) and ReduceLROnPlateau (lr cut when a watched value stops improving)."""
import bisect
import math

from .lr_base import LRScheduler


class SequentialLR(LRScheduler):
    """`schedulers[i]` drives the lr between milestones[i-1] and milestones[i]; each takes over from its
    own first epoch (step(0)), as PyTorch."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1 or len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: {len(schedulers)} schedulers need {max(len(schedulers) - 1, 0)} "
                             f"milestones, got {len(milestones)}")
        for i, s in enumerate(schedulers):
            if s.optimizer is not optimizer:
                raise ValueError(f"SequentialLR: scheduler {i} steps a different optimizer")
        if last_epoch != -1:
            raise ValueError("SequentialLR: resuming with last_epoch is not supported")
        self.optimizer, self._schedulers, self._milestones = optimizer, list(schedulers), list(milestones)
        self.last_epoch = last_epoch + 1
        for group in optimizer.param_groups:  # undo what constructing the schedulers did
            group["lr"] = group["initial_lr"]
        for s in self._schedulers:
            s.last_epoch -= 1
        self._schedulers[0]._initial_step()
        self._last_lr = self._schedulers[0].get_last_lr()

    def step(self):
        self.last_epoch += 1
        idx = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler.step(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state):
        state = dict(state)
        inner = state.pop("_schedulers")
        self.__dict__.update(state)
        for s, st in zip(self._schedulers, inner):
            s.load_state_dict(st)


class ChainedScheduler(LRScheduler):
    """Steps every scheduler in `schedulers` at each step(): their factors multiply (each scales the lr the
    one before it left)."""

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler: give at least one scheduler")
        optimizer = optimizer or schedulers[0].optimizer
        for i, s in enumerate(schedulers):
            if s.optimizer is not optimizer:
                raise ValueError(f"ChainedScheduler: scheduler {i} steps a different optimizer")
        self.optimizer, self._schedulers = optimizer, list(schedulers)
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def step(self):
        for s in self._schedulers:
            s.step()
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    state_dict = SequentialLR.state_dict
    load_state_dict = SequentialLR.load_state_dict


class ReduceLROnPlateau(LRScheduler):
    """Cut every group's lr by `factor` (not below min_lr) when the value given to step(value) has not
    improved by `threshold` for more than `patience` steps; then wait `cooldown` steps."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be below 1, got {factor}")
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}")
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        self.min_lrs = list(min_lr) if isinstance(min_lr, (list, tuple)) else [min_lr] * n
        if len(self.min_lrs) != n:
            raise ValueError(f"ReduceLROnPlateau: {len(self.min_lrs)} values of min_lr for {n} parameter groups")
        self.factor, self.patience, self.cooldown, self.eps = factor, patience, cooldown, eps
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs, self.cooldown_counter, self.last_epoch = 0, 0, 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def _better(self, value):
        if self.mode == "min":
            bar = self.best * (1.0 - self.threshold) if self.threshold_mode == "rel" else self.best - self.threshold
            return value < bar
        bar = self.best * (self.threshold + 1.0) if self.threshold_mode == "rel" else self.best + self.threshold
        return value > bar

    def step(self, metrics):
        """One observation of the watched value (a number or a 0-d tensor: read on the host)."""
        current = float(metrics)
        self.last_epoch += 1
        if self._better(current):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, low in zip(self.optimizer.param_groups, self.min_lrs):
                old = float(group["lr"])
                new = max(old * self.factor, low)
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]
