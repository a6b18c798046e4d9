"""The offload policy (CUDA table, as the virtual device uses it): small work stays on the CPU."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.runtime.offload_tables import CUDA_THRESHOLDS


def _ran_on_device(t):
    t.realize()
    return t.residency is not lt.Residency.HOST


@pytest.fixture
def dev(virtual):
    return virtual()


def test_elementwise_transcendentals_decline_under_16384_elements(dev):
    assert not _ran_on_device(lt.tensor(np.ones(16383, np.float32)).exp())
    assert _ran_on_device(lt.tensor(np.ones(16384, np.float32)).exp())


def test_matmul_declines_under_131072_multiply_adds(dev):
    assert not _ran_on_device(lt.tensor(np.ones((50, 50), np.float32)) @ lt.tensor(np.ones((50, 52), np.float32)))
    assert _ran_on_device(lt.tensor(np.ones((64, 64), np.float32)) @ lt.tensor(np.ones((64, 32), np.float32)))


def test_batched_matmul_counts_the_whole_stack(dev):
    a, b = np.ones((8, 16, 32), np.float32), np.ones((32, 32), np.float32)
    assert _ran_on_device(lt.tensor(a) @ lt.tensor(b))  # 8*16*32*32 = 131072


def test_broadcasts_and_transposes_decline_under_32768_result_elements(dev):
    small, big = np.ones((4, 64, 64), np.float32), np.ones((4, 128, 128), np.float32)
    assert not _ran_on_device(lt.tensor(small) - lt.tensor(small[..., :1]))
    assert _ran_on_device(lt.tensor(big) - lt.tensor(big[..., :1]))
    assert _ran_on_device(lt.tensor(big).permute(2, 0, 1).contiguous())


def test_a_plain_matrix_transpose_is_a_copy_that_declines_unless_its_operand_is_resident(dev):
    m = np.ones((256, 256), np.float32)  # 65536 elements: past the broadcast threshold
    assert not _ran_on_device(lt.tensor(m).T.contiguous())
    assert lt.transfer_log() == []
    resident = lt.tensor(m).exp().realize()
    assert _ran_on_device(resident.T.contiguous())


def test_axis_reductions_need_131072_inputs_and_256_slices(dev):
    assert not _ran_on_device(lt.tensor(np.ones((256, 256), np.float32)).sum(1))      # 65536 inputs
    assert not _ran_on_device(lt.tensor(np.ones((8, 32768), np.float32)).sum(1))      # 8 slices
    assert _ran_on_device(lt.tensor(np.ones((512, 512), np.float32)).sum(1))


def test_a_resident_reduction_with_few_long_slices_declines_unless_it_folds_in_partials(dev):
    x = lt.tensor(np.ones((8, 32768), np.float32)).exp().realize()  # resident, 8 slices of 32768
    assert not _ran_on_device(x.amax(1))  # one device thread per slice: downloaded instead
    assert not _ran_on_device(x.var())
    assert _ran_on_device(x.sum(1))  # float sums and means fold in parallel partials
    assert _ran_on_device(x.mean())
    assert _ran_on_device(x.reshape(32, 8192).amax(1))  # 32 slices
    assert _ran_on_device(x[:, :4096].amax(1))  # short slices: a thread each is cheap


def test_equal_shape_and_copy_ops_decline_when_operands_must_be_uploaded(dev):
    x = np.ones((512, 512), np.float32)
    for make in (lambda t: t + t, lambda t: t.sqrt(), lambda t: t > 0, lambda t: t.reshape(-1),
                 lambda t: t[1:], lambda t: t.index_select(0, lt.tensor([0, 3]))):
        assert not _ran_on_device(make(lt.tensor(x)))
    assert lt.transfer_log() == []


def test_resident_operands_make_any_size_a_member(dev):
    y = lt.tensor(np.ones((256, 256), np.float32)).exp().realize()  # resident
    for make in (lambda t: t + t, lambda t: t.sqrt(), lambda t: t[1:3, :2], lambda t: t.sum(), lambda t: t > 0):
        assert _ran_on_device(make(y))


def test_scalars_travel_as_kernel_parameters_not_copies(dev):
    y = lt.tensor(np.ones((256, 256), np.float32)).exp().realize()
    lt.clear_transfer_log()
    assert _ran_on_device(y * 3.0 + lt.tensor(2.0))
    assert lt.transfer_log() == []


def test_matrix_vector_products_go_to_the_device_on_the_second_offer(dev):
    m = lt.tensor(np.ones((512, 256), np.float32))  # 131072 elements: at the threshold
    v = lt.tensor(np.ones(256, np.float32))
    assert not _ran_on_device(m @ v)      # first offer: remembered, declined
    assert _ran_on_device(m @ v)          # same matrix again: transferred and computed
    lt.clear_transfer_log()
    assert _ran_on_device(m @ lt.tensor(np.full(256, 2, np.float32)))  # resident matrix: only the vector moves
    assert [r.nbytes for r in lt.transfer_log()] == [256 * 4]


def test_small_matrix_vector_products_never_offload(dev):
    m, v = lt.tensor(np.ones((64, 64), np.float32)), lt.tensor(np.ones(64, np.float32))
    assert not _ran_on_device(m @ v) and not _ran_on_device(m @ v)


def test_creation_ops_fill_on_the_device_from_8192_elements(dev):
    assert not _ran_on_device(lt.zeros(8191))
    assert _ran_on_device(lt.zeros(8192))
    assert lt.transfer_log() == []


def test_the_virtual_device_uses_the_cuda_table(dev):
    assert dev.thresholds is CUDA_THRESHOLDS


def test_a_copy_whose_result_is_eight_times_what_it_uploads_runs_on_the_device(dev):
    # The cross-entropy gradient: a one-hot scatter of (B*T,) targets into (B*T, V) rows.
    rows, vocab = 512, 65
    g = lt.tensor(np.ones((rows, 1), np.float32))
    idx = lt.tensor(np.arange(rows).reshape(rows, 1) % vocab)
    out = lt.tensor(np.zeros((rows, vocab), np.float32)).scatter_add(1, idx, g)
    assert _ran_on_device(out)
    small = lt.tensor(np.zeros((8, vocab), np.float32)).scatter_add(
        1, lt.tensor(np.arange(8).reshape(8, 1)), lt.tensor(np.ones((8, 1), np.float32)))
    assert not _ran_on_device(small)  # too small for the device
