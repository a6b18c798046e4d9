"""The base of every learning-rate scheduler (`LRScheduler`): the state and `step()` protocol the schedules in
lr_scheduler.py and lr_composite.py share."""


class LRScheduler:
    """Call `step()` once per optimizer step (after it); `get_last_lr()` lists the groups' lr now.
    Constructing one takes the first step (epoch 0), as in PyTorch."""

    def __init__(self, optimizer, last_epoch=-1):
        if last_epoch != -1:
            raise ValueError(f"{type(self).__name__}: resuming with last_epoch is not supported; use "
                             f"state_dict()/load_state_dict()")
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self.step()

    closed_form_lr = None  # a subclass's closed form instead of get_lr: closed_form_lr(initial lr, epoch) -> lr

    def get_lr(self):
        """The groups' lr at `last_epoch`, from what they are now (PyTorch's `get_lr`)."""
        if self.closed_form_lr is None:
            raise NotImplementedError(f"{type(self).__name__} defines neither get_lr nor closed_form_lr")
        return [self.closed_form_lr(base, self.last_epoch) for base in self.base_lrs]

    def _closed_form(self):
        """The groups' lr at `last_epoch` from the initial lr, or None where there is no closed form."""
        return None if self.closed_form_lr is None else self.get_lr()

    def step(self, epoch=None):
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            values = self._closed_form()
            if values is None:
                values = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self):
        return list(self._last_lr)

    def _lrs(self):
        return [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self):
        """Everything but the optimizer and functions (PyTorch's rule)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer" and not callable(v)
                and k != "lr_lambdas"}

    def load_state_dict(self, state):
        """Restore what state_dict() gave; a schedule with a closed form (`closed_form_lr`) also sets the
        groups' lr for the restored epoch."""
        self.__dict__.update(state)
        if self.closed_form_lr is not None:
            for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
                group["lr"] = lr
            self._last_lr = self._lrs()
