"""Neural-network building blocks in PyTorch's shape: Module, Parameter, layers, functional, init, utils."""
from . import functional, init, parallel, utils
from .activation_layers import (CELU, ELU, GELU, GLU, SELU, Flatten, Hardsigmoid, Hardswish, Hardtanh, Identity,
                                LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, ReLU, ReLU6, Sigmoid, SiLU, Softmax,
                                Softmin, Softplus, Softsign, Tanh, Tanhshrink, Threshold, Unflatten)
from .attention import MultiheadAttention
from .conv_layers import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, AvgPool3d,
                          Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, MaxPool1d, MaxPool2d, MaxPool3d)
from .layers import (Dropout, Embedding, LayerNorm, Linear, ModuleDict, ModuleList, ParameterDict, ParameterList,
                     RMSNorm, Sequential)
from .loss_layers import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss,
                          NLLLoss, SmoothL1Loss)
from .module import Module, Parameter
from .normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d, InstanceNorm2d,
                            InstanceNorm3d)
from .vision import Dropout1d, Dropout2d, Dropout3d, PixelShuffle, PixelUnshuffle, Upsample
from .recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
                          TransformerEncoderLayer)

__all__ = [name for name in dir() if not name.startswith("_")]
