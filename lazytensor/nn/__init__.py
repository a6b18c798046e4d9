"""Neural-network building blocks in PyTorch's shape: Module, Parameter, layers, functional, init, utils."""
from . import functional, init, utils
from .attention import MultiheadAttention
from .layers import (GELU, CrossEntropyLoss, Dropout, Embedding, Identity, LayerNorm, Linear, ModuleDict, ModuleList,
                     MSELoss, ReLU, RMSNorm, Sequential, SiLU)
from .module import Module, Parameter

__all__ = ["Module", "Parameter", "Linear", "Embedding", "LayerNorm", "RMSNorm", "Dropout", "GELU", "ReLU", "SiLU",
           "Identity", "MSELoss", "CrossEntropyLoss", "Sequential", "ModuleList", "ModuleDict", "MultiheadAttention",
           "functional",
           "init", "utils"]
