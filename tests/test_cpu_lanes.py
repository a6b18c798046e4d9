"""The vector reductions of kernels/cpu/lanes.py and the numba target choice of kernels/cpu/vector_width.py."""
import numba as nb
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lazytensor.kernels.cpu import vector_width
from lazytensor.kernels.cpu.lanes import LANES, fold_8_rows, fold_16_rows, lane_max, lane_sum
from lazytensor.kernels.cpu.reduce import sum_rows
from lazytensor.kernels.reference import KERNELS
from lazytensor.runtime.backends.numba_backend import NumbaBackend
from lazytensor.runtime.graph import Node


@nb.njit
def _folds(x, sixteen=False):
    """Each row's fold through fold_8_rows, or fold_16_rows with `sixteen` (whole blocks only)."""
    out = np.empty(x.shape[0])
    block = 16 if sixteen else 8
    for m in range(0, x.shape[0] - block + 1, block):
        if sixteen:
            fold_16_rows(x, m, out)
        else:
            fold_8_rows(x, m, out)
    return out


@nb.njit
def _lane_sums(x):
    return np.array([lane_sum(x[m]) for m in range(x.shape[0])])


@nb.njit
def _lane_maxes(x):
    return np.array([lane_max(x[m]) for m in range(x.shape[0])])


def _left_folds(x):
    """Each row's float64 left fold, one Python addition at a time."""
    out = []
    for row in x:
        total = float(row[0])
        for v in row[1:]:
            total += float(v)
        out.append(total)
    return np.array(out)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 70), st.sampled_from([np.float32, np.float64]), st.integers(0, 2 ** 32 - 1))
def test_fold_8_rows_is_each_rows_left_fold_byte_for_byte(k, dtype, seed):
    rng = np.random.default_rng(seed)
    # magnitudes over many binades, so that any other order of the additions rounds differently
    x = (rng.standard_normal((16, k)) * np.exp2(rng.integers(-30, 30, (16, k)))).astype(dtype)
    assert _folds(x).tobytes() == _left_folds(x).tobytes()


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 70), st.sampled_from([np.float32, np.float64]), st.integers(0, 2 ** 32 - 1))
def test_fold_16_rows_is_each_rows_left_fold_byte_for_byte(k, dtype, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((32, k)) * np.exp2(rng.integers(-30, 30, (32, k)))).astype(dtype)
    assert _folds(x, True).tobytes() == _left_folds(x).tobytes()


def test_fold_8_rows_keeps_signed_zeros_infinities_and_nan_as_the_left_fold_does():
    x = np.zeros((8, 19), np.float32)
    x[0] = -0.0                     # all -0.0: the fold of -0.0s is -0.0
    x[1, 3], x[1, 11] = np.inf, -np.inf
    x[2, 17] = np.nan
    x[3, 0] = np.inf
    got = _folds(x)
    want = _left_folds(x)
    assert got.tobytes() == want.tobytes()
    assert np.signbit(got[0]) and np.isnan(got[1]) and np.isnan(got[2]) and got[3] == np.inf


def test_fold_8_rows_reads_rows_of_a_column_slice_where_they_lie():
    x = np.random.default_rng(1).standard_normal((16, 300)).astype(np.float32)[:, 5:140]
    assert _folds(x).tobytes() == _left_folds(x).tobytes()


def test_sum_rows_gives_the_left_folds_bytes_in_blocks_of_sixteen_eight_and_one():
    x = np.random.default_rng(2).standard_normal((27, 129)).astype(np.float32) * 1e6  # 16 + 8 + 3 rows
    got = np.empty(27)
    sum_rows(x, got)
    assert got.tobytes() == _left_folds(x).tobytes()


@pytest.mark.parametrize("k", [1, 15, 16, 17, 48, 129])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lane_sum_and_lane_max_agree_with_numpy(k, dtype):
    x = np.random.default_rng(k).standard_normal((5, k)).astype(dtype)
    bound = k * np.finfo(np.float64).eps * np.abs(x.astype(np.float64)).sum(axis=1)  # any order's error bound
    assert np.all(np.abs(_lane_sums(x) - x.astype(np.float64).sum(axis=1)) <= bound)
    assert _lane_maxes(x).tobytes() == x.max(axis=1).tobytes()
    assert LANES == 16


@pytest.mark.parametrize("k", [16, 17, 128, 1000])
def test_float32_softmax_of_long_rows_is_within_a_few_units_of_the_reference(k):
    rng = np.random.default_rng(k)
    x = (rng.standard_normal((33, k)) * 30).astype(np.float32)  # exps spread over many binades
    x[::4, k // 3:] = -np.inf
    x[5, 2] = np.nan
    attrs = {"axis": 1, "dtype": np.dtype(np.float32)}
    got = NumbaBackend().launch(Node("softmax", (), attrs, x.shape, x.dtype), [x])
    want = KERNELS["softmax"](attrs, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    eps = np.finfo(np.float32).eps
    np.testing.assert_allclose(got, want, rtol=8 * eps, atol=8 * eps)


def test_full_width_is_left_alone_where_the_user_chose_the_cpu_features(monkeypatch):
    monkeypatch.setattr(vector_width.config, "CPU_FEATURES", "+avx2")
    assert vector_width.prefer_full_width() is False
    assert vector_width.config.CPU_FEATURES == "+avx2"


def test_full_width_is_not_changed_once_numba_has_started(monkeypatch):
    # this process has compiled kernels already: its target is fixed, so nothing is set now
    monkeypatch.setattr(vector_width.config, "CPU_FEATURES", None)
    monkeypatch.setattr(vector_width.config, "CPU_NAME", None)
    _folds(np.zeros((8, 9), np.float32))
    assert vector_width.prefer_full_width() is False
    assert vector_width.config.CPU_FEATURES is None


def test_full_width_features_drop_only_the_256_bit_preference():
    features = vector_width.full_width_features()
    if features is None:
        pytest.skip("this CPU has no AVX-512")
    assert features.endswith(",-prefer-256-bit") and "+avx512f" in features
