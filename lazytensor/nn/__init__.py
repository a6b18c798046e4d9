"""Neural-network building blocks in PyTorch's shape: Module, Parameter, layers, functional, init, utils."""
from . import functional, init, utils
from .layers import GELU, Dropout, Embedding, LayerNorm, Linear, ModuleList, ReLU, Sequential
from .module import Module, Parameter

__all__ = ["Module", "Parameter", "Linear", "Embedding", "LayerNorm", "Dropout", "GELU", "ReLU", "Sequential",
           "ModuleList", "functional", "init", "utils"]
