"""lt.distributions as PyTorch programs use them (a policy's Categorical, a VAE's Normal and KL term):
log_prob, entropy, moments and KL against PyTorch, gradients through log_prob and rsample, sample shapes,
seeded samples, and sample statistics where the numbers are lazytensor's own."""
import numpy as np
import pytest

import lazytensor as lt

torch = pytest.importorskip("torch")
D, T = lt.distributions, torch.distributions
R = np.random.default_rng(0)
TOL = dict(rtol=1e-5, atol=1e-6)


def _pair(make, *arrays):
    """The same distribution in both libraries from float32 arrays (as tensors requiring grad)."""
    ours = [lt.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    return make(D, *ours), make(T, *theirs), ours, theirs


def _same(a, b):
    np.testing.assert_allclose(a.numpy(), b.detach().numpy(), **TOL)


CASES = {
    "Normal": (lambda M, loc, scale: M.Normal(loc, scale), (R.standard_normal((3, 4)), R.uniform(0.5, 2, (3, 4))),
               lambda: R.standard_normal((3, 4))),
    "Bernoulli probs": (lambda M, p: M.Bernoulli(probs=p), (R.uniform(0.05, 0.95, (5,)),),
                        lambda: (R.random(5) < 0.5).astype(np.float32)),
    "Bernoulli logits": (lambda M, lg: M.Bernoulli(logits=lg), (R.standard_normal((2, 3)),),
                         lambda: (R.random((2, 3)) < 0.5).astype(np.float32)),
    "Categorical probs": (lambda M, p: M.Categorical(probs=p), (R.uniform(0.1, 1, (4, 5)),),
                          lambda: R.integers(0, 5, (4,))),
    "Categorical logits": (lambda M, lg: M.Categorical(logits=lg), (R.standard_normal((2, 3, 6)),),
                           lambda: R.integers(0, 6, (2, 3))),
    "Uniform": (lambda M, low, high: M.Uniform(low, high), (R.uniform(-2, 0, (4,)), R.uniform(1, 3, (4,))),
                lambda: R.uniform(0, 0.99, (4,))),  # inside every support (PyTorch validates)
    "Independent Normal": (lambda M, loc, scale: M.Independent(M.Normal(loc, scale), 1),
                           (R.standard_normal((3, 4)), R.uniform(0.5, 2, (3, 4))), lambda: R.standard_normal((3, 4))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_prob_entropy_and_their_gradients_match_pytorch(name):
    make, params, value = CASES[name]
    ours, theirs, p_lt, p_t = _pair(make, *(a.astype(np.float32) for a in params))
    v = value()
    v = v.astype(np.float32) if v.dtype.kind == "f" else v
    lp_lt, lp_t = ours.log_prob(lt.tensor(v)), theirs.log_prob(torch.tensor(v))
    _same(lp_lt, lp_t)
    ent_lt, ent_t = ours.entropy(), theirs.entropy()
    _same(ent_lt, ent_t)
    (lp_lt.sum() + ent_lt.sum()).backward()
    (lp_t.sum() + ent_t.sum()).backward()
    for a, b in zip(p_lt, p_t):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)
    assert ours.batch_shape == tuple(theirs.batch_shape) and ours.event_shape == tuple(theirs.event_shape)
    for shape in ((), (2,), (3, 2)):
        assert ours.sample(shape).shape == tuple(theirs.sample(shape).shape)


@pytest.mark.parametrize("name", ["Normal", "Bernoulli probs", "Uniform", "Independent Normal"])
def test_mean_and_variance_match_pytorch(name):
    make, params, _ = CASES[name]
    ours, theirs, _, _ = _pair(make, *(a.astype(np.float32) for a in params))
    _same(ours.mean, theirs.mean)
    _same(ours.variance, theirs.variance)
    _same(ours.stddev, theirs.stddev)


@pytest.mark.parametrize("kind", ["Normal", "Bernoulli", "Categorical", "Uniform", "Independent"])
def test_kl_divergence_matches_pytorch(kind):
    a, b = R.standard_normal((3, 4)).astype(np.float32), R.standard_normal((3, 4)).astype(np.float32)
    s, t = R.uniform(0.5, 2, (3, 4)).astype(np.float32), R.uniform(0.5, 2, (3, 4)).astype(np.float32)
    def make(M, x, y):
        lib = lt if M is D else torch
        return pairs(M, x, y, lib.tensor(s), lib.tensor(t))
    pairs = {"Normal": lambda M, x, y, s, t: (M.Normal(x, s), M.Normal(y, t)),
             "Bernoulli": lambda M, x, y, s, t: (M.Bernoulli(logits=x), M.Bernoulli(logits=y)),
             "Categorical": lambda M, x, y, s, t: (M.Categorical(logits=x), M.Categorical(logits=y)),
             "Uniform": lambda M, x, y, s, t: (M.Uniform(x - 5, x + 5), M.Uniform(y - 6, y + 6)),
             "Independent": lambda M, x, y, s, t: (M.Independent(M.Normal(x, s), 1),
                                                   M.Independent(M.Normal(y, t), 1))}[kind]
    (p_lt, q_lt), (p_t, q_t) = make(D, lt.tensor(a), lt.tensor(b)), make(T, torch.tensor(a), torch.tensor(b))
    ours, theirs = D.kl_divergence(p_lt, q_lt), T.kl_divergence(p_t, q_t)
    finite = np.isfinite(theirs.numpy())
    np.testing.assert_allclose(ours.numpy()[finite], theirs.numpy()[finite], **TOL)
    assert (np.isinf(ours.numpy()) == ~finite).all()


def test_kl_of_a_pair_without_a_closed_form_is_not_implemented():
    with pytest.raises(NotImplementedError, match="no closed form for Normal and Uniform"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Uniform(0.0, 1.0))


def test_rsample_carries_gradients_to_the_parameters_as_in_a_vae():
    lt.manual_seed(0)
    loc, log_scale = lt.zeros(1000, requires_grad=True), lt.zeros(1000, requires_grad=True)
    z = D.Normal(loc, log_scale.exp()).rsample()
    (z * z).mean().backward()
    # d/dloc E[z^2] = 2 loc = 0 on average; d/dlog_scale = 2 scale^2 = 2 on average (per element / 1000)
    assert abs(float(loc.grad.sum())) < 0.2 and abs(float(log_scale.grad.sum()) - 2.0) < 0.3


def test_samples_are_seeded_and_follow_their_distribution():
    lt.manual_seed(3)
    first = D.Categorical(probs=lt.tensor([0.1, 0.2, 0.7])).sample((20000,))
    lt.manual_seed(3)
    again = D.Categorical(probs=lt.tensor([0.1, 0.2, 0.7])).sample((20000,))
    assert first.tolist() == again.tolist()
    freq = np.bincount(first.numpy(), minlength=3) / 20000
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.7], atol=0.015)
    normal = D.Normal(lt.tensor(2.0), lt.tensor(3.0)).sample((20000,)).numpy()
    assert abs(normal.mean() - 2.0) < 0.1 and abs(normal.std() - 3.0) < 0.1
    coin = D.Bernoulli(probs=lt.tensor(0.3)).sample((20000,)).numpy()
    assert set(np.unique(coin)) == {0.0, 1.0} and abs(coin.mean() - 0.3) < 0.015
    u = D.Uniform(-1.0, 3.0).sample((20000,)).numpy()
    assert u.min() >= -1.0 and u.max() < 3.0 and abs(u.mean() - 1.0) < 0.05


def test_a_policy_gradient_step_reads_like_pytorchs():
    lt.manual_seed(0)
    policy = lt.nn.Linear(4, 3)
    opt = lt.optim.SGD(policy.parameters(), lr=0.1)
    dist = D.Categorical(logits=policy(lt.ones(8, 4)))
    action = dist.sample()
    loss = -(dist.log_prob(action) * lt.ones(8)).mean() - 0.01 * dist.entropy().mean()
    loss.backward()
    opt.step()
    assert action.shape == (8,) and action.dtype == lt.int64 and policy.weight.grad.shape == (3, 4)


def test_multivariate_normal_matches_pytorch_from_each_matrix_form():
    cov = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 0.7]], np.float32)
    loc, value = R.standard_normal(3).astype(np.float32), R.standard_normal((5, 3)).astype(np.float32)
    for kw in ("covariance_matrix", "precision_matrix", "scale_tril"):
        m = {"covariance_matrix": cov, "precision_matrix": np.linalg.inv(cov),
             "scale_tril": np.linalg.cholesky(cov)}[kw].astype(np.float32)
        ours = D.MultivariateNormal(lt.tensor(loc), **{kw: lt.tensor(m)})
        theirs = T.MultivariateNormal(torch.tensor(loc), **{kw: torch.tensor(m)})
        np.testing.assert_allclose(ours.log_prob(lt.tensor(value)).numpy(),
                                   theirs.log_prob(torch.tensor(value)).numpy(), rtol=1e-4)
        np.testing.assert_allclose(float(ours.entropy()), float(theirs.entropy()), rtol=1e-5)
        np.testing.assert_allclose(ours.covariance_matrix.numpy(), cov, rtol=1e-5, atol=1e-6)
    assert ours.rsample((4, 2)).shape == (4, 2, 3)


def test_multivariate_normal_refuses_gradients_through_a_covariance_it_cannot_give():
    with pytest.raises(NotImplementedError, match="Independent"):
        D.MultivariateNormal(lt.zeros(2), covariance_matrix=lt.eye(2).requires_grad_(True))
    with pytest.raises(ValueError, match="exactly one of probs and logits"):
        D.Categorical()
