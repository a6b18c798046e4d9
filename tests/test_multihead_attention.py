"""nn.MultiheadAttention against PyTorch's, from the same state dict: outputs, returned weights, masks
(bool and float, attention and key padding), layouts (sequence-first, batch_first, unbatched) and
gradients."""
import numpy as np
import pytest

import lazytensor as lt

E, H, L, S, N = 16, 4, 5, 7, 3


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _pair(torch, **kwargs):
    ours = lt.nn.MultiheadAttention(E, H, **kwargs)
    theirs = torch.nn.MultiheadAttention(E, H, dtype=torch.float64, **kwargs)
    ours.to(lt.float64)
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()})
    return ours, theirs


def _inputs(shape_q, shape_kv, seed=0):
    rs = np.random.default_rng(seed)
    return rs.standard_normal(shape_q), rs.standard_normal(shape_kv), rs.standard_normal(shape_kv)


def _close(a, b):
    np.testing.assert_allclose(a.numpy() if hasattr(a, "numpy") else a, b.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_the_parameters_have_pytorchs_names_and_shapes():
    m = lt.nn.MultiheadAttention(E, H)
    assert {k: v.shape for k, v in m.state_dict().items()} == {
        "in_proj_weight": (3 * E, E), "in_proj_bias": (3 * E,), "out_proj.weight": (E, E), "out_proj.bias": (E,)}
    assert not m.in_proj_bias.numpy().any() and not m.out_proj.bias.numpy().any()
    bound = np.sqrt(6.0 / (4 * E))  # xavier_uniform over (3E, E)
    assert np.abs(m.in_proj_weight.numpy()).max() <= bound


@pytest.mark.parametrize("batch_first", [False, True])
def test_outputs_and_averaged_weights_match_pytorch(torch, batch_first):
    ours, theirs = _pair(torch, batch_first=batch_first)
    shape_q, shape_kv = ((N, L, E), (N, S, E)) if batch_first else ((L, N, E), (S, N, E))
    q, k, v = _inputs(shape_q, shape_kv)
    out, w = ours(lt.tensor(q), lt.tensor(k), lt.tensor(v))
    tout, tw = theirs(*(torch.from_numpy(a) for a in (q, k, v)))
    assert out.shape == tuple(tout.shape) and w.shape == (N, L, S)
    _close(out, tout)
    _close(w, tw)


def test_per_head_weights_and_need_weights_false(torch):
    ours, theirs = _pair(torch)
    q, k, v = _inputs((L, N, E), (S, N, E), 1)
    _, w = ours(lt.tensor(q), lt.tensor(k), lt.tensor(v), average_attn_weights=False)
    _, tw = theirs(*(torch.from_numpy(a) for a in (q, k, v)), average_attn_weights=False)
    assert w.shape == (N, H, L, S)
    _close(w, tw)
    out, none = ours(lt.tensor(q), lt.tensor(k), lt.tensor(v), need_weights=False)
    assert none is None and out.shape == (L, N, E)


@pytest.mark.parametrize("kind", ["bool causal", "float", "per head bool"])
def test_attention_masks_match_pytorch(torch, kind):
    ours, theirs = _pair(torch, batch_first=True)
    x = np.random.default_rng(2).standard_normal((N, L, E))
    if kind == "bool causal":
        mask = np.triu(np.ones((L, L), bool), 1)
    elif kind == "float":
        mask = np.random.default_rng(3).standard_normal((L, L))
    else:
        mask = np.random.default_rng(4).random((N * H, L, L)) < 0.3
        mask[..., 0] = False  # every row keeps one position
    out, w = ours(lt.tensor(x), lt.tensor(x), lt.tensor(x), attn_mask=lt.tensor(mask))
    tx = torch.from_numpy(x)
    tout, tw = theirs(tx, tx, tx, attn_mask=torch.from_numpy(mask))
    _close(out, tout)
    _close(w, tw)


def test_key_padding_mask_hides_padded_keys_as_in_pytorch(torch):
    ours, theirs = _pair(torch, batch_first=True)
    q, k, v = _inputs((N, L, E), (N, S, E), 5)
    pad = np.zeros((N, S), bool)
    pad[0, 4:], pad[2, 6:] = True, True
    out, w = ours(lt.tensor(q), lt.tensor(k), lt.tensor(v), key_padding_mask=lt.tensor(pad))
    tout, tw = theirs(*(torch.from_numpy(a) for a in (q, k, v)), key_padding_mask=torch.from_numpy(pad))
    _close(out, tout)
    _close(w, tw)
    assert not w.numpy()[0, :, 4:].any()


def test_unbatched_inputs_match_pytorch(torch):
    ours, theirs = _pair(torch)
    q, k, v = _inputs((L, E), (S, E), 6)
    out, w = ours(lt.tensor(q), lt.tensor(k), lt.tensor(v))
    tout, tw = theirs(*(torch.from_numpy(a) for a in (q, k, v)))
    assert out.shape == (L, E) and w.shape == (L, S)
    _close(out, tout)
    _close(w, tw)


def test_different_key_and_value_sizes_use_separate_projections(torch):
    ours = lt.nn.MultiheadAttention(E, H, kdim=6, vdim=10).to(lt.float64)
    theirs = torch.nn.MultiheadAttention(E, H, kdim=6, vdim=10, dtype=torch.float64)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()})
    rs = np.random.default_rng(7)
    q, k, v = rs.standard_normal((L, N, E)), rs.standard_normal((S, N, 6)), rs.standard_normal((S, N, 10))
    out, _ = ours(lt.tensor(q), lt.tensor(k), lt.tensor(v))
    _close(out, theirs(*(torch.from_numpy(a) for a in (q, k, v)))[0])


def test_gradients_of_every_parameter_match_pytorch(torch):
    ours, theirs = _pair(torch, batch_first=True)
    x = np.random.default_rng(8).standard_normal((N, L, E))
    mask = np.triu(np.ones((L, L), bool), 1)
    out, _ = ours(lt.tensor(x), lt.tensor(x), lt.tensor(x), attn_mask=lt.tensor(mask), is_causal=True)
    (out * out).sum().backward()
    tx = torch.from_numpy(x)
    tout, _ = theirs(tx, tx, tx, attn_mask=torch.from_numpy(mask), is_causal=True)
    (tout * tout).sum().backward()
    for (name, p), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == tname
        _close(p.grad, tp.grad)


def test_training_mode_drops_attention_weights_and_eval_does_not():
    m = lt.nn.MultiheadAttention(E, H, dropout=0.5, batch_first=True)
    x = lt.randn(N, L, E)
    lt.manual_seed(1)
    a, _ = m(x, x, x, need_weights=False)
    m.eval()
    b, _ = m(x, x, x, need_weights=False)
    c, _ = m(x, x, x, need_weights=False)
    assert not np.allclose(a.numpy(), b.numpy()) and np.array_equal(b.numpy(), c.numpy())


def test_bad_arguments_raise_errors_that_say_what_to_do():
    with pytest.raises(ValueError, match="divisible"):
        lt.nn.MultiheadAttention(10, 3)
    m = lt.nn.MultiheadAttention(E, H, batch_first=True)
    x = lt.randn(N, L, E)
    with pytest.raises(RuntimeError, match="pass attn_mask too"):
        m(x, x, x, is_causal=True)
    with pytest.raises(ValueError, match="attn_mask must have shape"):
        m(x, x, x, attn_mask=lt.ones(L, L + 1, dtype=lt.bool))
    with pytest.raises(ValueError, match="key_padding_mask must have shape"):
        m(x, x, x, key_padding_mask=lt.ones(N, L + 1, dtype=lt.bool))
    with pytest.raises(ValueError, match="embedding size"):
        m(lt.randn(N, L, E + 1), x, x)
