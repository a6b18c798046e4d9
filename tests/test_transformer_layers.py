"""nn.Transformer and its encoder/decoder stacks in PyTorch's shape: the same parameter names, masks and
outputs as PyTorch from the same weights (dropout off), post-norm and norm_first, and a program that
subclasses nn.Transformer at import time."""
import copy

import numpy as np
import pytest

import lazytensor as lt


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _twins(torch, make):
    theirs, ours = make(torch.nn).double(), make(lt.nn).double()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _compare(torch, ours, theirs, arrays, masks=None):
    masks = masks or {}
    a = ours(*(lt.tensor(x) for x in arrays), **{k: lt.tensor(v) for k, v in masks.items()})
    b = theirs(*(torch.tensor(x) for x in arrays), **{k: torch.tensor(v) for k, v in masks.items()})
    w = np.random.default_rng(3).standard_normal(tuple(b.shape))
    (a * lt.tensor(w)).sum().backward(), (b * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-9, atol=1e-11)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-7, atol=1e-11, err_msg=name)


R = np.random.default_rng(0)
SRC, TGT = R.standard_normal((5, 2, 8)), R.standard_normal((4, 2, 8))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_matches_pytorch_with_a_causal_mask(torch, norm_first, activation):
    ours, theirs = _twins(torch, lambda nn: nn.TransformerEncoder(
        nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=activation, norm_first=norm_first), 2,
        norm=nn.LayerNorm(8)))
    mask = np.triu(np.full((5, 5), -np.inf), 1)
    _compare(torch, ours, theirs, [SRC], {"mask": mask})


def test_encoder_layer_with_batch_first_and_a_padding_mask_matches_pytorch(torch):
    ours, theirs = _twins(torch, lambda nn: nn.TransformerEncoderLayer(8, 4, 12, dropout=0.0, batch_first=True))
    pad = np.array([[False] * 4 + [True], [False] * 5])
    _compare(torch, ours, theirs, [SRC.transpose(1, 0, 2)], {"src_key_padding_mask": pad})


def test_decoder_matches_pytorch(torch):
    ours, theirs = _twins(torch, lambda nn: nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), 2))
    mask = np.triu(np.full((4, 4), -np.inf), 1)
    _compare(torch, ours, theirs, [TGT, SRC], {"tgt_mask": mask})


def test_transformer_matches_pytorch(torch):
    ours, theirs = _twins(torch, lambda nn: nn.Transformer(8, 2, 2, 2, 16, dropout=0.0))
    mask = lt.nn.Transformer.generate_square_subsequent_mask(4).numpy()
    np.testing.assert_array_equal(mask, torch.nn.Transformer.generate_square_subsequent_mask(4).numpy())
    _compare(torch, ours, theirs, [SRC, TGT], {"tgt_mask": mask})


def test_encoder_layers_are_independent_copies():
    layer = lt.nn.TransformerEncoderLayer(8, 2, 16)
    enc = lt.nn.TransformerEncoder(layer, 3)
    weights = [id(m.linear1.weight) for m in enc.layers]
    assert len(set(weights)) == 3 and id(layer.linear1.weight) not in weights
    assert len(list(enc.parameters())) == 3 * len(list(layer.parameters()))
    twin = copy.deepcopy(enc)
    with lt.no_grad():
        twin.layers[0].linear1.weight.add_(1.0)
    assert not lt.equal(twin.layers[0].linear1.weight, enc.layers[0].linear1.weight)


def test_a_subclass_of_transformer_replaces_its_decoder_as_programs_do():
    class LanguageModel(lt.nn.Transformer):  # word_language_model's pattern
        def __init__(self):
            super().__init__(d_model=8, nhead=2, dim_feedforward=16, num_encoder_layers=1)
            self.decoder = lt.nn.Linear(8, 11)

        def forward(self, src):
            return self.decoder(self.encoder(src))
    out = LanguageModel()(lt.randn(3, 2, 8))
    assert out.shape == (3, 2, 11)
