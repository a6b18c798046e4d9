"""What the public-program tests share: moving PyTorch's initial weights into the lazytensor model through
a checkpoint file (torch.save -> lt.load, as a user moves one), switching dropout off (the two frameworks draw
different masks), and comparing per-step losses within a relative tolerance."""
import io
import types

import numpy as np

import lazytensor as lt

REL = 1e-5


class Weights:
    """PyTorch's initial weights, saved with torch.save before it trains; `into(model)` loads them into
    the lazytensor model with lt.load, as a user moves a checkpoint."""

    def __init__(self):
        self.blob = None

    def keep(self, torch, model):
        buf = io.BytesIO()
        torch.save(model.state_dict(), buf)
        self.blob = buf.getvalue()

    def into(self, model):
        result = model.load_state_dict(lt.load(io.BytesIO(self.blob)))
        assert not result.missing_keys and not result.unexpected_keys


def same_weights(torch, weights, fw, model):
    """The first framework (PyTorch) keeps its initial weights; the second (lazytensor) starts from them."""
    if fw == "torch":
        weights.keep(torch, model)
    else:
        weights.into(model)


def dropout_off(model):
    for m in model.modules():
        if type(m).__name__ in ("Dropout", "Dropout1d", "Dropout2d"):
            m.p = 0.0
        elif type(m).__name__ == "MultiheadAttention":
            m.dropout = 0.0


def close(ours, theirs, tolerance=REL):
    """Per-step losses agree within `tolerance`, relative; returns the largest difference."""
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    assert ours.shape == theirs.shape and len(ours) > 0
    rel = np.abs(ours - theirs) / np.maximum(np.abs(theirs), 1e-30)
    assert rel.max() <= tolerance, (rel.max(), ours, theirs)
    return rel.max()


class SharedRandom(types.ModuleType):
    """A framework module (torch or lazytensor) whose draws a program makes through it (`randn`, `randn_like`,
    `randint`) come from one NumPy stream that both frameworks' runs share (their own generators differ), so
    a program that samples (a GAN's latent codes, a VAE's reparameterization, a trainer's batch offsets)
    computes the same values under both. Everything else is the framework's own."""

    _SHARED = ("randn", "randn_like", "randint")

    def __init__(self, framework, seed):
        super().__init__(framework.__name__)
        self.__dict__.update({k: v for k, v in vars(framework).items() if k not in self._SHARED})
        self._framework, self._stream = framework, np.random.default_rng(seed)

    def randn(self, *size, dtype=None, device=None, requires_grad=False, generator=None, out=None):
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        values = self._stream.standard_normal(shape).astype(np.float32)
        out = self._framework.tensor(values, device=device)
        return out if dtype is None else out.to(dtype)

    def randn_like(self, like, dtype=None, device=None):
        return self.randn(*like.shape, dtype=dtype or like.dtype, device=device or like.device)

    def randint(self, *bounds_and_size, size=None, dtype=None, device=None, generator=None):
        if size is None:
            *bounds, size = bounds_and_size
        else:
            bounds = list(bounds_and_size)
        low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
        values = self._stream.integers(int(low), int(high), tuple(size))
        return self._framework.tensor(values, dtype=dtype or self._framework.int64, device=device)
