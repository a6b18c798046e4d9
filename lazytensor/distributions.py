"""`lt.distributions` in the shape of `torch.distributions`: Normal, Bernoulli, Categorical, Uniform,
MultivariateNormal and Independent, with `sample`, `rsample` (reparameterized: gradients flow to the
parameters), `log_prob`, `entropy`, `mean`/`variance`/`stddev`, and `kl_divergence` for the pairs with a
closed form. Formulas are PyTorch's; samples come from lazytensor's seeded generator (`lt.manual_seed`),
so they are reproducible but not PyTorch's numbers. `validate_args` is accepted and not checked (a check
would read values on the host).
"""
import math

import numpy as np

from . import dtypes
from .activations import softmax
from .creation import eye, tensor
from .elementwise import where
from .nn.functional import binary_cross_entropy_with_logits, softplus
from .random import rand, randn
from .reductions import logsumexp
from .sorting import multinomial
from .tensor import Tensor

_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


def _as_tensor(value, like=None):
    if isinstance(value, Tensor):
        return value
    dtype = like.dtype if isinstance(like, Tensor) and like.dtype.is_floating_point else dtypes.float32
    return tensor(value, dtype=dtype)


def _broadcast(*values):
    """The values as tensors of one broadcast shape (Python numbers take the tensors' dtype)."""
    first = next((v for v in values if isinstance(v, Tensor)), None)
    ts = [_as_tensor(v, first) for v in values]
    shape = np.broadcast_shapes(*(t.shape for t in ts))
    return [t if t.shape == shape else t.expand(*shape) for t in ts]


def _clamped(probs):
    eps = float(np.finfo(probs.dtype.np).eps)
    return probs.clip(eps, 1 - eps)


class Distribution:
    """What every distribution has: batch and event shapes, sample() without gradients, and the
    shape `sample_shape + batch_shape + event_shape` of draws."""

    has_rsample = False

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self.batch_shape, self.event_shape = tuple(batch_shape), tuple(event_shape)

    def _extended_shape(self, sample_shape=()):
        sample_shape = (sample_shape,) if isinstance(sample_shape, int) else tuple(sample_shape)
        return sample_shape + self.batch_shape + self.event_shape

    def sample(self, sample_shape=()):
        return self.rsample(sample_shape).detach()

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sample")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def __repr__(self):
        return f"{type(self).__name__}(batch_shape={self.batch_shape}, event_shape={self.event_shape})"


class Normal(Distribution):
    """N(loc, scale^2), elementwise."""

    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = _broadcast(loc, scale)
        super().__init__(self.loc.shape)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self.scale ** 2

    @property
    def stddev(self):
        return self.scale

    def rsample(self, sample_shape=()):
        eps = randn(*self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        value = _as_tensor(value, self.loc)
        return -((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log() - _LOG_SQRT_2PI

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()

    def cdf(self, value):
        return 0.5 * (1 + ((_as_tensor(value, self.loc) - self.loc) * (1 / math.sqrt(2)) / self.scale).erf())


class Bernoulli(Distribution):
    """1 with probability `probs` (or sigmoid(`logits`)), else 0; elementwise."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Bernoulli: give exactly one of probs and logits")
        if probs is not None:
            self.probs = _as_tensor(probs)
            clamped = _clamped(self.probs)
            self.logits = clamped.log() - (-clamped).log1p()
        else:
            self.logits = _as_tensor(logits)
            self.probs = self.logits.sigmoid()
        super().__init__(self.probs.shape)

    @property
    def mean(self):
        return self.probs

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        u = rand(*self._extended_shape(sample_shape), dtype=self.probs.dtype)
        return (u < self.probs.detach()).to(self.probs.dtype)

    def log_prob(self, value):
        logits, value = _broadcast(self.logits, _as_tensor(value, self.logits))
        return -binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")


class Categorical(Distribution):
    """One of K categories with probabilities `probs` (normalized along the last axis) or
    softmax(`logits`); the batch is every axis but the last."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Categorical: give exactly one of probs and logits")
        if probs is not None:
            probs = _as_tensor(probs)
            if probs.ndim < 1:
                raise ValueError("Categorical: probs must have at least one dimension")
            self.probs = probs / probs.sum(dim=-1, keepdim=True)
            self.logits = _clamped(self.probs).log()
        else:
            logits = _as_tensor(logits)
            if logits.ndim < 1:
                raise ValueError("Categorical: logits must have at least one dimension")
            self.logits = logits - logsumexp(logits, dim=-1, keepdim=True)
            self.probs = softmax(logits, dim=-1)
        self._num_events = self.probs.shape[-1]
        super().__init__(self.probs.shape[:-1])

    @property
    def param_shape(self):
        return self.probs.shape

    @property
    def mean(self):
        raise NotImplementedError("Categorical has no mean (its values are category labels)")

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        draws = int(np.prod(shape[:len(shape) - len(self.batch_shape)], dtype=np.int64))
        flat = self.probs.detach().reshape(-1, self._num_events)
        picked = multinomial(flat, draws, replacement=True)  # (batch, draws)
        return picked.transpose(0, 1).reshape(*shape)

    def log_prob(self, value):
        value = _as_tensor(value).to(dtypes.int64).unsqueeze(-1)
        shape = np.broadcast_shapes(value.shape[:-1], self.logits.shape[:-1])
        index = value.expand(*shape, 1)
        logits = self.logits.expand(*shape, self._num_events)
        return logits.gather(-1, index).squeeze(-1)

    def entropy(self):
        low = float(np.finfo(self.logits.dtype.np).min)
        return -(self.logits.clip(min=low) * self.probs).sum(dim=-1)


class Uniform(Distribution):
    """Uniform on [low, high), elementwise."""

    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = _broadcast(low, high)
        super().__init__(self.low.shape)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def variance(self):
        return (self.high - self.low) ** 2 / 12

    def rsample(self, sample_shape=()):
        u = rand(*self._extended_shape(sample_shape), dtype=self.low.dtype)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        value = _as_tensor(value, self.low)
        inside = ((self.low <= value) & (self.high > value)).to(self.low.dtype)
        return inside.log() - (self.high - self.low).log()

    def entropy(self):
        return (self.high - self.low).log()


class Independent(Distribution):
    """`base` with its last `reinterpreted_batch_ndims` batch axes counted as one event: log_prob and
    entropy summed over them (a diagonal multivariate normal is Independent(Normal(loc, scale), 1))."""

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        n = int(reinterpreted_batch_ndims)
        if n > len(base_distribution.batch_shape):
            raise ValueError(f"Independent: reinterpreted_batch_ndims={n} exceeds the base's batch rank "
                             f"{len(base_distribution.batch_shape)}")
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, n
        shape = base_distribution.batch_shape + base_distribution.event_shape
        cut = len(base_distribution.batch_shape) - n
        super().__init__(shape[:cut], shape[cut:])
        self.has_rsample = base_distribution.has_rsample

    def _sum_event(self, value):
        return value.sum(dim=tuple(range(-self.reinterpreted_batch_ndims, 0))) if self.reinterpreted_batch_ndims \
            else value

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return self._sum_event(self.base_dist.log_prob(value))

    def entropy(self):
        return self._sum_event(self.base_dist.entropy())


class MultivariateNormal(Distribution):
    """N(loc, Sigma) with Sigma given as covariance_matrix, precision_matrix or scale_tril (lower
    Cholesky factor). The factor of a covariance or precision matrix is computed on the host from its
    value (a host read), so gradients reach `loc` and the samples but not a matrix that requires grad:
    for a learned diagonal use Independent(Normal(loc, scale), 1)."""

    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("MultivariateNormal: give exactly one of covariance_matrix, precision_matrix and "
                             "scale_tril")
        loc = _as_tensor(loc)
        matrix = _as_tensor(given[0], loc)
        if matrix.requires_grad and scale_tril is None:
            raise NotImplementedError("MultivariateNormal: gradients through a covariance or precision matrix are "
                                      "not supported; give scale_tril, or Independent(Normal(loc, scale), 1)")
        if matrix.ndim < 2 or matrix.shape[-1] != matrix.shape[-2] or matrix.shape[-1] != loc.shape[-1]:
            raise ValueError(f"MultivariateNormal: loc {loc.shape} needs square matrices of its last size, got "
                             f"{matrix.shape}")
        if scale_tril is not None:
            self.scale_tril = matrix
        else:
            value = matrix.detach().numpy().astype(np.float64)
            if precision_matrix is not None:
                value = np.linalg.inv(value)
            try:
                factor = np.linalg.cholesky(value)
            except np.linalg.LinAlgError:
                raise ValueError("MultivariateNormal: the matrix is not positive definite") from None
            self.scale_tril = tensor(factor.astype(loc.dtype.np))
        batch = np.broadcast_shapes(loc.shape[:-1], self.scale_tril.shape[:-2])
        self.loc = loc.expand(*batch, loc.shape[-1])
        super().__init__(batch, loc.shape[-1:])

    @property
    def covariance_matrix(self):
        return self.scale_tril @ self.scale_tril.mT

    @property
    def mean(self):
        return self.loc

    @property
    def variance(self):
        return (self.scale_tril ** 2).sum(dim=-1).expand(*self.batch_shape, *self.event_shape)

    def rsample(self, sample_shape=()):
        eps = randn(*self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + (self.scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        k = self.scale_tril.shape[-1]
        diagonal = (self.scale_tril * eye(k, dtype=self.scale_tril.dtype)).sum(dim=-1)
        return diagonal.log().sum(dim=-1)

    def log_prob(self, value):
        if self.scale_tril.requires_grad:
            raise NotImplementedError("MultivariateNormal.log_prob: gradients through scale_tril need a "
                                      "triangular solve with gradients, which lazytensor does not have")
        inverse = tensor(np.linalg.inv(self.scale_tril.numpy().astype(np.float64)).astype(self.loc.dtype.np))
        z = (inverse @ (_as_tensor(value, self.loc) - self.loc).unsqueeze(-1)).squeeze(-1)
        k = self.event_shape[0]
        return -0.5 * (k * math.log(2 * math.pi) + (z * z).sum(dim=-1)) - self._half_log_det()

    def entropy(self):
        k = self.event_shape[0]
        out = 0.5 * k * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return out.expand(*self.batch_shape) if self.batch_shape else out


# ---- KL divergences -------------------------------------------------------------------------------------
def _kl_normal(p, q):
    var_ratio = (p.scale / q.scale) ** 2
    t1 = ((p.loc - q.loc) / q.scale) ** 2
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


def _kl_bernoulli(p, q):
    inf = float("inf")
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = where(p.probs == 0, 0.0, where(q.probs == 0, inf, t1))
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = where(p.probs == 1, 0.0, where(q.probs == 1, inf, t2))
    return t1 + t2


def _kl_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = where(p.probs == 0, 0.0, where(q.probs == 0, float("inf"), t))
    return t.sum(dim=-1)


def _kl_uniform(p, q):
    out = ((q.high - q.low) / (p.high - p.low)).log()
    return where((q.low > p.low) | (q.high < p.high), float("inf"), out)


def _kl_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("kl_divergence: Independent distributions over different event ranks")
    return p._sum_event(kl_divergence(p.base_dist, q.base_dist))


_KL = {(Normal, Normal): _kl_normal, (Bernoulli, Bernoulli): _kl_bernoulli,
       (Categorical, Categorical): _kl_categorical, (Uniform, Uniform): _kl_uniform,
       (Independent, Independent): _kl_independent}


def kl_divergence(p, q):
    """KL(p || q) for the pairs with a closed form (Normal, Bernoulli, Categorical, Uniform, Independent of
    those); NotImplementedError for the others, as PyTorch."""
    rule = _KL.get((type(p), type(q)))
    if rule is None:
        raise NotImplementedError(f"kl_divergence: no closed form for {type(p).__name__} and {type(q).__name__}")
    return rule(p, q)


__all__ = ["Distribution", "Normal", "Bernoulli", "Categorical", "Uniform", "Independent", "MultivariateNormal",
           "kl_divergence"]
