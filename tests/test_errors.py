"""Bad input raises a specific exception at the user's line, with a message that says what to fix."""
import numpy as np
import pytest

import lazytensor as lt


def test_broadcast_mismatch_names_the_op_and_both_shapes():
    with pytest.raises(ValueError, match=r"add: shapes \(2, 3\) and \(4,\) cannot be broadcast"):
        lt.ones(2, 3) + lt.ones(4)


def test_shape_errors_raise_when_the_op_is_built_not_when_realized():
    a, b = lt.ones(3), lt.ones(4)
    with pytest.raises(ValueError):
        lt.where(lt.ones(3) > 0, a, b)
    assert lt.counters()["realizations"] == 0


def test_bad_reshape():
    with pytest.raises(ValueError, match=r"cannot reshape tensor of shape \(2, 3\) \(6 elements\) into \(4,\)"):
        lt.ones(2, 3).reshape(4)
    with pytest.raises(ValueError, match="only one dimension can be -1"):
        lt.ones(6).reshape(-1, -1)


@pytest.mark.parametrize("call", [lambda t: t.sum(2), lambda t: t.softmax(-3), lambda t: t.transpose(0, 5),
                                  lambda t: t.unsqueeze(4), lambda t: t.argmax(9)])
def test_bad_axis_is_an_axis_error_naming_the_valid_range(call):
    with pytest.raises(lt.AxisError, match=r"out of range for a tensor of dimension 2 \(valid: \[-2, 1\]\)|"
                                           r"dimension 3"):
        call(lt.ones(2, 3))


def test_axis_error_is_both_index_error_and_value_error():
    assert issubclass(lt.AxisError, IndexError) and issubclass(lt.AxisError, ValueError)


def test_out_of_range_integer_index_names_the_index_and_the_size():
    with pytest.raises(IndexError, match="index 5 is out of range for dimension 1 with size 3"):
        lt.ones(2, 3)[0, 5]
    with pytest.raises(IndexError, match="index -4 is out of range for dimension 0 with size 2"):
        lt.ones(2, 3)[-4]


def test_too_many_indices():
    with pytest.raises(IndexError, match="too many indices for a tensor of dimension 1"):
        lt.ones(3)[0, 0]


def test_out_of_range_index_tensor_known_at_build_time():
    with pytest.raises(IndexError, match="index 7 is out of range for dimension 0 with size 5"):
        lt.ones(5, 2).index_select(0, lt.tensor([1, 7]))


def test_out_of_range_computed_index_tensor_raises_when_realized():
    idx = lt.tensor([1, 2]) * 4  # a pending index: its values are known only when computed
    out = lt.ones(5, 2).index_select(0, idx)
    with pytest.raises(IndexError, match="index 8 is out of range for dimension 0 with size 5"):
        out.numpy()


def test_float_index_tensor_is_a_type_error():
    with pytest.raises(TypeError, match="integer tensors, got lt.float32"):
        lt.ones(3)[lt.tensor([0.0, 1.0])]
    with pytest.raises(TypeError, match="must be integer tensors"):
        lt.ones(3, 2).gather(0, lt.tensor([[0.0]]))


def test_a_bool_mask_read_selects_as_numpy_and_a_bool_index_elsewhere_points_to_masked_fill():
    assert lt.tensor([1.0, 2.0, 3.0])[lt.tensor([True, False, True])].tolist() == [1.0, 3.0]
    with pytest.raises(IndexError, match="does not match the dimensions"):
        lt.ones(3)[lt.tensor([True, False])]
    with pytest.raises(TypeError, match="masked_fill"):
        lt.ones(3).index_select(0, lt.tensor([True, False, True]))


def test_ragged_nested_lists():
    with pytest.raises(ValueError, match="ragged"):
        lt.tensor([[1, 2], [3]])


@pytest.mark.parametrize("bad", [np.str_, np.datetime64, "float8", object])
def test_unsupported_dtypes_list_the_supported_ones(bad):
    with pytest.raises(TypeError, match="supports float32, float64, int32, int64, bool, int8, .*, complex128, "
                                       "float16, bfloat16"):
        lt.zeros(2, dtype=bad)


def test_from_numpy_with_an_unsupported_dtype():
    with pytest.raises(TypeError, match="unsupported dtype"):
        lt.from_numpy(np.zeros(3, "datetime64[s]"))


def test_strings_are_not_tensor_data():
    with pytest.raises(TypeError):
        lt.tensor(["a", "b"])


def test_scalar_that_does_not_fit_the_dtype():
    with pytest.raises(OverflowError, match="does not fit in lt.int32"):
        lt.zeros(2, dtype=lt.int32) + 2 ** 40


def test_integer_tensor_to_a_negative_integer_power():
    with pytest.raises(ValueError, match="negative integer power -1"):
        lt.tensor([1, 2]) ** -1


def test_reducing_an_empty_dimension_with_no_identity():
    with pytest.raises(ValueError, match="size 0"):
        lt.zeros(0, 3).amax(0)
    with pytest.raises(ValueError, match="empty"):
        lt.zeros(0).argmax()


def test_ambiguous_truth_value():
    with pytest.raises(ValueError, match="ambiguous"):
        bool(lt.ones(2))
    with pytest.raises(ValueError, match="one element"):
        lt.ones(2).item()


def test_matmul_of_a_0d_tensor():
    with pytest.raises(ValueError, match="at least one dimension"):
        lt.tensor(2.0) @ lt.ones(2)


def test_bad_permutation_and_expand():
    with pytest.raises(ValueError, match="not a permutation"):
        lt.ones(2, 3).permute(0, 0)
    with pytest.raises(ValueError, match=r"cannot expand shape \(2, 3\) to \(4, 3\)"):
        lt.ones(2, 3).expand(4, 3)


def test_cat_with_mismatched_shapes():
    with pytest.raises(ValueError, match=r"tensor 1 has shape \(2, 4\)"):
        lt.cat([lt.ones(2, 3), lt.ones(2, 4)])


def test_where_needs_a_bool_condition():
    with pytest.raises(TypeError, match="condition must be a bool tensor"):
        lt.where(lt.ones(2), 1.0, 0.0)


def test_bool_arithmetic_that_numpy_rejects():
    with pytest.raises(TypeError, match="cast"):
        lt.tensor([True]) - lt.tensor([False])
    with pytest.raises(TypeError, match="bool"):
        -lt.tensor([True])


def test_negative_sizes():
    with pytest.raises(ValueError, match="negative size"):
        lt.zeros(2, -1)


@pytest.mark.parametrize("call, name", [
    (lambda F: F.conv2d(lt.ones(1, 1, 5, 5), lt.ones(1, 1, 3, 3), stride=0), "conv2d"),
    (lambda F: F.conv1d(lt.ones(1, 1, 5), lt.ones(1, 1, 3), stride=0), "conv1d"),
    (lambda F: F.max_pool2d(lt.ones(1, 1, 4, 4), 2, stride=0), "max_pool2d"),
    (lambda F: F.avg_pool2d(lt.ones(1, 1, 4, 4), 0), "avg_pool2d"),
    (lambda F: F.max_pool2d(lt.ones(1, 1, 4, 4), 0), "max_pool2d"),
    (lambda F: F.max_pool1d(lt.ones(1, 1, 4), 2, stride=0), "max_pool1d"),
    (lambda F: F.avg_pool1d(lt.ones(1, 1, 4), 0), "avg_pool1d"),
])
def test_a_zero_stride_or_kernel_in_a_convolution_or_pooling_is_a_value_error_naming_the_function(call, name):
    with pytest.raises(ValueError, match=rf"^{name}: kernel, stride and dilation must be positive"):
        call(lt.nn.functional)


def test_a_one_dimensional_pooling_names_itself_in_its_errors():
    with pytest.raises(ValueError, match=r"^max_pool1d: padding \(2, 2\)|^max_pool1d: padding"):
        lt.nn.functional.max_pool1d(lt.ones(1, 1, 8), 2, padding=2)
    with pytest.raises(NotImplementedError, match="^avg_pool1d: ceil_mode"):
        lt.nn.functional.avg_pool1d(lt.ones(1, 1, 8), 2, ceil_mode=True)


def test_an_lstm_given_a_tensor_for_hx_says_it_needs_the_pair():
    lstm = lt.nn.LSTM(3, 4)
    with pytest.raises(TypeError, match=r"LSTM: hx must be a tuple \(h_0, c_0\) of two tensors, got a Tensor"):
        lstm(lt.ones(5, 2, 3), lt.zeros(1, 2, 4))


def test_a_gru_over_an_empty_sequence_says_the_sequence_is_empty():
    with pytest.raises(ValueError, match="GRU: the input sequence is empty"):
        lt.nn.GRU(3, 4)(lt.ones(0, 2, 3))


@pytest.mark.parametrize("make", [
    lambda nn, **kw: nn.Linear(3, 2, **kw), lambda nn, **kw: nn.Conv2d(1, 2, 3, **kw),
    lambda nn, **kw: nn.Conv1d(1, 2, 3, **kw), lambda nn, **kw: nn.RNN(3, 4, **kw),
    lambda nn, **kw: nn.LSTM(3, 4, **kw),
    lambda nn, **kw: nn.GRU(3, 4, **kw), lambda nn, **kw: nn.GRUCell(3, 4, **kw),
    lambda nn, **kw: nn.LSTMCell(3, 4, **kw), lambda nn, **kw: nn.RNNCell(3, 4, **kw),
    lambda nn, **kw: nn.Embedding(5, 3, **kw), lambda nn, **kw: nn.LayerNorm(4, **kw),
    lambda nn, **kw: nn.RMSNorm(4, **kw), lambda nn, **kw: nn.PReLU(**kw),
    lambda nn, **kw: nn.MultiheadAttention(4, 2, **kw), lambda nn, **kw: nn.TransformerEncoderLayer(4, 2, 8, **kw),
], ids=lambda f: "")
def test_every_module_with_parameters_takes_pytorchs_dtype_and_device_arguments(make):
    module = make(lt.nn, dtype=lt.float64, device="cpu")
    assert {p.dtype for p in module.parameters()} == {lt.float64}
    assert {p.dtype for p in make(lt.nn).parameters()} == {lt.float32}


def test_a_module_refuses_an_integer_dtype_for_its_parameters():
    with pytest.raises(TypeError, match="Linear: dtype must be a floating-point dtype"):
        lt.nn.Linear(3, 2, dtype=lt.int64)
