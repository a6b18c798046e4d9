"""`lt.compile` as PyTorch programs call torch.compile: a compiled module trains like the module itself
(and like PyTorch's compiled one), keeps PyTorch's `_orig_mod.` state-dict keys, replays its evaluation
calls; a compiled function is lt.jit of it; the decorator forms and PyTorch's keyword arguments."""
import warnings

import numpy as np
import pytest

import lazytensor as lt


def _mlp(nn):
    return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))


def test_a_compiled_module_has_pytorchs_state_dict_keys():
    torch = pytest.importorskip("torch")
    assert list(lt.compile(_mlp(lt.nn)).state_dict()) == list(torch.compile(_mlp(torch.nn)).state_dict())


def test_a_compiled_module_trains_like_pytorchs_compiled_module():
    torch = pytest.importorskip("torch")
    theirs = torch.compile(_mlp(torch.nn), backend="eager")
    ours = lt.compile(_mlp(lt.nn), mode="max-autotune", fullgraph=True)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((16, 3)).astype(np.float32)
    opt_t, opt_l = torch.optim.AdamW(theirs.parameters(), lr=0.05), lt.optim.AdamW(ours.parameters(), lr=0.05)
    for _ in range(4):
        lt_loss = (ours(lt.tensor(x)) ** 2).mean()
        t_loss = (theirs(torch.tensor(x)) ** 2).mean()
        lt_loss.backward()
        t_loss.backward()
        t_value = t_loss.item()
        opt_l.step()
        opt_t.step()
        opt_l.zero_grad()
        opt_t.zero_grad()
        np.testing.assert_allclose(float(lt_loss), t_value, rtol=1e-5)


def test_a_compiled_module_replays_its_evaluation_calls_with_the_modules_values():
    model = _mlp(lt.nn)
    compiled = lt.compile(model)
    compiled.eval()
    x = lt.tensor(np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32))
    with lt.no_grad():
        expected = model(x).tolist()
        with warnings.catch_warnings():
            warnings.simplefilter("error", lt.JitWarning)
            got = [compiled(x).tolist() for _ in range(5)]
    assert all(g == expected for g in got)
    assert compiled._replayed.stats()["replayed"] >= 3


def test_a_compiled_module_reaches_the_originals_attributes():
    model = _mlp(lt.nn)
    model.vocab = 7
    compiled = lt.compile(model)
    assert compiled.vocab == 7 and compiled._orig_mod is model
    assert [p is q for p, q in zip(compiled.parameters(), model.parameters())] == [True] * 4


def test_compile_as_a_decorator_with_and_without_arguments():
    @lt.compile
    def double(x):
        return (x * 2).sum()

    @lt.compile(mode="reduce-overhead", dynamic=False)
    def triple(x):
        return (x * 3).sum()
    assert [double(lt.ones(3)).item() for _ in range(4)] == [6.0] * 4
    assert [triple(lt.ones(3)).item() for _ in range(4)] == [9.0] * 4
    assert double.stats()["replayed"] == 2


def test_compile_with_disable_gives_the_model_back():
    model = _mlp(lt.nn)
    assert lt.compile(model, disable=True) is model


def test_compile_refuses_what_is_neither_a_module_nor_a_function():
    with pytest.raises(TypeError, match="expected a module or a function"):
        lt.compile(3)
