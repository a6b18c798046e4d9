"""Learning-rate schedules in PyTorch's shape (`lt.optim.lr_scheduler`): each sets every parameter
group's "lr" from its initial lr and the number of `step()` calls so far (closed forms)."""
import math


class LRScheduler:
    """Call `step()` once per optimizer step (after it); `get_last_lr()` lists the groups' lr now."""

    def __init__(self, optimizer, last_epoch=-1):
        if last_epoch != -1:
            raise ValueError(f"{type(self).__name__}: resuming with last_epoch is not supported; use "
                             f"state_dict()/load_state_dict()")
        self.optimizer = optimizer
        self.base_lrs = [g["lr"] for g in optimizer.param_groups]
        self.last_epoch = 0
        self._apply()

    def factor(self, base, epoch):
        """The lr of a group whose initial lr is `base`, after `epoch` steps."""
        raise NotImplementedError

    def _apply(self):
        for g, base in zip(self.optimizer.param_groups, self.base_lrs):
            g["lr"] = self.factor(base, self.last_epoch)

    def step(self):
        self.last_epoch += 1
        self._apply()

    def get_last_lr(self):
        return [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self):
        return {"base_lrs": list(self.base_lrs), "last_epoch": self.last_epoch}

    def load_state_dict(self, state):
        self.base_lrs, self.last_epoch = list(state["base_lrs"]), int(state["last_epoch"])
        self._apply()


class LambdaLR(LRScheduler):
    """lr = initial lr * lr_lambda(epoch) (one function, or one per group)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise ValueError(f"LambdaLR: {len(self.lr_lambdas)} functions for {n} parameter groups")
        super().__init__(optimizer, last_epoch)

    def _apply(self):
        for g, base, fn in zip(self.optimizer.param_groups, self.base_lrs, self.lr_lambdas):
            g["lr"] = base * fn(self.last_epoch)


class StepLR(LRScheduler):
    """lr = initial lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        if step_size <= 0:
            raise ValueError(f"StepLR: step_size must be positive, got {step_size}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def factor(self, base, epoch):
        return base * self.gamma ** (epoch // self.step_size)


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (initial lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):  # noqa: N803 (PyTorch's name)
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def factor(self, base, epoch):
        return self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2
