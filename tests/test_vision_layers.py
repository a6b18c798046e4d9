"""Vision layers as PyTorch programs use them: F.pad's reflect/replicate/circular modes, F.interpolate and
Upsample (nearest, nearest-exact, linear, bilinear, trilinear; sizes and scale factors; align_corners),
pixel shuffle, channel dropout and the parameter containers; values and gradients against PyTorch
(Hypothesis over shapes where the rules have edges)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt

torch = pytest.importorskip("torch")
F, G = lt.nn.functional, torch.nn.functional


def _both(fn_lt, fn_t, x, rtol=1e-6, atol=1e-6):
    """fn on x in both libraries: values, and the input's gradient under a random weighting."""
    xo, xt = lt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yo, yt = fn_lt(xo), fn_t(xt)
    assert yo.shape == tuple(yt.shape)
    np.testing.assert_allclose(yo.numpy(), yt.detach().numpy(), rtol=rtol, atol=atol)
    w = np.random.default_rng(5).standard_normal(yo.shape).astype(x.dtype)
    (yo * lt.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(mode=st.sampled_from(["reflect", "replicate", "circular"]), dims=st.integers(1, 3),
       sizes=st.lists(st.integers(2, 6), min_size=3, max_size=3), pads=st.lists(st.integers(0, 5), min_size=6,
                                                                                  max_size=6))
def test_pad_modes_match_pytorch(mode, dims, sizes, pads):
    shape = (2, 3) + tuple(sizes[:dims])
    pad = []
    for i in range(dims):  # from the last dim backwards; reflect needs less than the dim, circular at most it
        n = shape[-1 - i]
        limit = n - 1 if mode == "reflect" else n
        pad += [min(pads[2 * i], limit), min(pads[2 * i + 1], limit)]
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    _both(lambda t: F.pad(t, pad, mode=mode), lambda t: G.pad(t, pad, mode=mode), x, rtol=0, atol=0)


def test_reflect_padding_as_wide_as_the_dim_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"reflect padding \(3, 0\) must be smaller than the dim it pads \(3\)"):
        F.pad(lt.ones(1, 1, 3), (3, 0), mode="reflect")
    with pytest.raises(ValueError, match="mode must be"):
        F.pad(lt.ones(1, 1, 3), (1, 1), mode="mirror")


@settings(max_examples=60, deadline=None)
@given(h=st.integers(1, 7), w=st.integers(1, 7), oh=st.integers(1, 12), ow=st.integers(1, 12),
       mode=st.sampled_from(["nearest", "nearest-exact", "bilinear"]), align=st.booleans())
def test_interpolate_to_a_size_matches_pytorch(h, w, oh, ow, mode, align):
    x = np.random.default_rng(h * 10 + w).standard_normal((2, 3, h, w)).astype(np.float32)
    kw = dict(size=(oh, ow), mode=mode, align_corners=align if mode == "bilinear" else None)
    _both(lambda t: F.interpolate(t, **kw), lambda t: G.interpolate(t, **kw), x)


@pytest.mark.parametrize("kw", [dict(scale_factor=2, mode="nearest"), dict(scale_factor=2.5, mode="nearest"),
                                dict(scale_factor=(0.5, 3), mode="bilinear"), dict(scale_factor=1.7, mode="bilinear",
                                                                                   align_corners=True),
                                dict(scale_factor=0.3, mode="nearest-exact"),
                                dict(scale_factor=2.2, mode="bilinear", recompute_scale_factor=True)])
def test_interpolate_by_a_scale_factor_matches_pytorch(kw):
    x = np.random.default_rng(0).standard_normal((1, 2, 6, 7)).astype(np.float32)
    _both(lambda t: F.interpolate(t, **kw), lambda t: G.interpolate(t, **kw), x)


@pytest.mark.parametrize("mode,shape", [("linear", (2, 3, 7)), ("nearest", (2, 3, 7)), ("trilinear", (1, 2, 3, 4, 5))])
def test_interpolate_in_one_and_three_dims_matches_pytorch(mode, shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    size = tuple(2 * n + 1 for n in shape[2:])
    _both(lambda t: F.interpolate(t, size=size, mode=mode), lambda t: G.interpolate(t, size=size, mode=mode), x)


def test_upsample_is_interpolate_as_a_module():
    x = np.random.default_rng(2).standard_normal((1, 1, 3, 3)).astype(np.float32)
    ours = lt.nn.Upsample(scale_factor=2, mode="bilinear")(lt.tensor(x))
    theirs = torch.nn.Upsample(scale_factor=2, mode="bilinear")(torch.tensor(x))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-6)


def test_interpolate_names_what_it_cannot_do():
    with pytest.raises(ValueError, match="exactly one of size and scale_factor"):
        F.interpolate(lt.ones(1, 1, 4, 4))
    with pytest.raises(ValueError, match="mode='bilinear' takes 4-D input"):
        F.interpolate(lt.ones(1, 1, 4), size=8, mode="bilinear")
    with pytest.raises(NotImplementedError, match="mode='bicubic'"):
        F.interpolate(lt.ones(1, 1, 4, 4), size=8, mode="bicubic")


@pytest.mark.parametrize("r,shape", [(2, (2, 8, 3, 4)), (3, (1, 9, 2, 2)), (2, (4, 3, 2))])
def test_pixel_shuffle_and_unshuffle_match_pytorch(r, shape):
    x = np.random.default_rng(r).standard_normal(shape).astype(np.float32)
    _both(lambda t: F.pixel_shuffle(t, r), lambda t: G.pixel_shuffle(t, r), x, rtol=0, atol=0)
    y = G.pixel_shuffle(torch.tensor(x), r).numpy()
    _both(lambda t: lt.nn.PixelUnshuffle(r)(t), lambda t: torch.nn.PixelUnshuffle(r)(t), y, rtol=0, atol=0)


@pytest.mark.parametrize("name,shape", [("Dropout1d", (4, 6, 50)), ("Dropout2d", (4, 6, 5, 10)),
                                        ("Dropout3d", (2, 6, 2, 5, 5)), ("Dropout2d", (6, 5, 10))])
def test_channel_dropout_zeros_whole_channels_and_scales_the_rest(name, shape):
    lt.manual_seed(0)
    layer = getattr(lt.nn, name)(p=0.5)
    out = layer(lt.ones(*shape)).numpy()
    spatial = {"Dropout1d": 1, "Dropout2d": 2, "Dropout3d": 3}[name]
    per_channel = out.reshape(*shape[:len(shape) - spatial], -1)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel.min(axis=-1) == per_channel.max(axis=-1)).all()  # a channel is all kept or all dropped
    assert 0 < (per_channel[..., 0] == 0).mean() < 1
    layer.eval()
    assert (layer(lt.ones(*shape)).numpy() == 1).all()


def test_parameter_containers_register_their_parameters_as_pytorch_names_them():
    ours = lt.nn.ParameterList([lt.ones(2), lt.nn.Parameter(lt.zeros(3))])
    ours.append(lt.ones(1))
    theirs = torch.nn.ParameterList([torch.ones(2), torch.nn.Parameter(torch.zeros(3))])
    theirs.append(torch.ones(1))
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["0", "1", "2"]
    assert all(isinstance(p, lt.nn.Parameter) and p.requires_grad for p in ours) and len(ours[1:]) == 2
    d = lt.nn.ParameterDict({"a": lt.ones(2)})
    d["b"] = lt.zeros(1)
    model = lt.nn.Module()
    model.extra = d
    assert list(model.state_dict()) == ["extra.a", "extra.b"] and "a" in d and len(list(model.parameters())) == 2
    with pytest.raises(TypeError, match="ParameterList: expected a Parameter or a Tensor"):
        ours.append(3.0)
