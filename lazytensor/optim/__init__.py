"""Optimizers and learning-rate schedules in PyTorch's shape (`lt.optim`, `lt.optim.lr_scheduler`)."""
from . import lr_scheduler
from .adaptive import Adadelta, Adagrad, RMSprop
from .lbfgs import LBFGS
from .optimizer import TOGETHER_MAX_ELEMENTS, SGD, Adam, AdamW, CosineWarmupLR, Optimizer

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adagrad", "RMSprop", "Adadelta", "LBFGS", "CosineWarmupLR",
           "lr_scheduler", "TOGETHER_MAX_ELEMENTS"]
