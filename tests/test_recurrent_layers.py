"""RNN, LSTM, GRU and their cells in PyTorch's shape: the same parameter names and shapes, outputs, final
states and gradients as PyTorch from the same weights, in every layout (batch_first, unbatched, layers,
bidirectional, initial states)."""
import numpy as np
import pytest

import lazytensor as lt


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _twins(torch, name, *args, **kwargs):
    theirs = getattr(torch.nn, name)(*args, **kwargs).double()
    ours = getattr(lt.nn, name)(*args, **kwargs).double()
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _flat(out):
    return [out] if not isinstance(out, tuple) else [t for o in out for t in _flat(o)]


def _compare(torch, ours, theirs, *inputs):
    a = [lt.tensor(x) if not isinstance(x, tuple) else tuple(lt.tensor(v) for v in x) for x in inputs]
    b = [torch.tensor(x) if not isinstance(x, tuple) else tuple(torch.tensor(v) for v in x) for x in inputs]
    got, ref = _flat(ours(*a)), _flat(theirs(*b))
    rs = np.random.default_rng(9)
    lsum, tsum = 0, 0
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(g.numpy(), r.detach().numpy(), rtol=1e-10, atol=1e-12)
        w = rs.standard_normal(tuple(r.shape))
        lsum, tsum = lsum + (g * lt.tensor(w)).sum(), tsum + (r * torch.tensor(w)).sum()
    lsum.backward(), tsum.backward()
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)


X = np.random.default_rng(0).standard_normal((5, 3, 4))


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("options", [dict(), dict(num_layers=2, batch_first=True), dict(bidirectional=True),
                                     dict(num_layers=2, bidirectional=True, bias=False)], ids=str)
def test_recurrent_layers_match_pytorch(torch, name, options):
    ours, theirs = _twins(torch, name, 4, 6, **options)
    _compare(torch, ours, theirs, X)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_recurrent_layers_take_initial_states_and_unbatched_inputs(torch, name):
    ours, theirs = _twins(torch, name, 4, 6, num_layers=2)
    rs = np.random.default_rng(1)
    h = rs.standard_normal((2, 3, 6))
    state = (h, rs.standard_normal((2, 3, 6))) if name == "LSTM" else h
    _compare(torch, ours, theirs, X, state)
    ours.zero_grad(), theirs.zero_grad()
    _compare(torch, ours, theirs, X[:, 0])


def test_rnn_with_relu_nonlinearity_matches_pytorch(torch):
    ours, theirs = _twins(torch, "RNN", 4, 5, nonlinearity="relu")
    _compare(torch, ours, theirs, X)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_match_pytorch_with_and_without_a_state(torch, name):
    ours, theirs = _twins(torch, name, 4, 6)
    _compare(torch, ours, theirs, X[0])
    rs = np.random.default_rng(2)
    h = rs.standard_normal((3, 6))
    ours.zero_grad(), theirs.zero_grad()
    _compare(torch, ours, theirs, X[0], (h, rs.standard_normal((3, 6))) if name == "LSTMCell" else h)


def test_recurrent_errors_name_the_problem():
    with pytest.raises(ValueError, match="input_size=4"):
        lt.nn.LSTM(4, 6)(lt.ones(5, 3, 7))
    with pytest.raises(ValueError, match=r"expected \(1, 3, 6\)"):
        lt.nn.GRU(4, 6)(lt.ones(5, 3, 4), lt.ones(2, 3, 6))
    with pytest.raises(NotImplementedError, match="proj_size"):
        lt.nn.LSTM(4, 6, proj_size=2)
    with pytest.raises(ValueError, match="nonlinearity"):
        lt.nn.RNN(4, 6, nonlinearity="gelu")


def test_an_lstm_language_model_step_replays_under_jit():
    lt.manual_seed(0)
    emb, lstm, head = lt.nn.Embedding(10, 8), lt.nn.LSTM(8, 8, batch_first=True), lt.nn.Linear(8, 10)
    params = list(emb.parameters()) + list(lstm.parameters()) + list(head.parameters())
    opt = lt.optim.Adam(params, lr=1e-2)

    def step(x, y):
        out, _ = lstm(emb(x))
        loss = lt.nn.functional.cross_entropy(head(out).reshape(-1, 10), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    compiled = lt.jit(step)
    x = lt.tensor(np.random.default_rng(0).integers(0, 10, (2, 6)))
    losses = [compiled(x, x).item() for _ in range(4)]
    assert losses[-1] < losses[0] and compiled.stats()["replayed"] >= 1
