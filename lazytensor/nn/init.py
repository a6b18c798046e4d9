"""In-place initializers (as torch.nn.init): each gives the tensor a new seeded value without recording grads."""
from .. import grad_mode
from .. import random as _random


def normal_(t, mean=0.0, std=1.0):
    with grad_mode.no_grad():
        return _random.normal_(t, mean, std)


def uniform_(t, a=0.0, b=1.0):
    with grad_mode.no_grad():
        return _random.uniform_(t, a, b)


def zeros_(t):
    with grad_mode.no_grad():
        return t.fill_(0)


def ones_(t):
    with grad_mode.no_grad():
        return t.fill_(1)
