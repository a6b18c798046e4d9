"""`lt.onnx` in the shape of `torch.onnx`, so that `import torch.onnx` in a program still imports: exporting
a model to ONNX is not something lazytensor does."""


def export(*args, **kwargs):
    """Not supported: NotImplementedError."""
    raise NotImplementedError("lt.onnx.export: lazytensor cannot export ONNX models; save the weights with "
                              "lt.save(model.state_dict(), path) and export from PyTorch, which loads them")


def is_in_onnx_export():
    return False
