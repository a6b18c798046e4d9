"""Residency on the virtual device: values stay where computed; host reads and writes move exactly once."""
import gc
import io

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.runtime.residency import Buffer, Residency
from lazytensor.runtime.executor import exclusive_result

N = 256 * 256  # float32 elements: above the CUDA table's elementwise thresholds


@pytest.fixture
def big(rng):
    return rng.normal(size=(256, 256)).astype(np.float32)


def _resident(x):
    """An operand already on the device: a transcendental (accepted at this size) of host data."""
    return lt.tensor(x).exp().realize()


def test_building_a_graph_moves_nothing(virtual, big):
    virtual()
    y = (lt.tensor(big).exp() @ lt.tensor(big)).tanh().sum(1)
    assert lt.transfer_log() == [] and not y.is_realized


def test_device_results_stay_on_the_device_after_realize(virtual, big):
    virtual()
    y = _resident(big)
    assert y.residency is Residency.DEVICE and y.device == "virtual"
    assert y._node.buffer.host is None  # no host array until the first host read
    assert [r.direction for r in lt.transfer_log()] == ["h2d"]


def test_chain_of_ten_ops_on_resident_operands_moves_nothing_until_one_read(virtual, big):
    virtual()
    y = _resident(big)
    lt.clear_transfer_log()
    for i in range(10):
        y = (y * 0.5 + 1.0) if i % 2 else (y - 0.25).abs()
    y.realize()
    assert lt.transfer_log() == []
    y.numpy()
    log = lt.transfer_log()
    assert len(log) == 1
    assert log[0].direction == "d2h" and log[0].nbytes == y.nbytes and log[0].reason == "host-read:numpy"


def test_an_operand_already_resident_is_never_uploaded_again(virtual, big):
    virtual()
    x = lt.tensor(big)
    (x.exp() + 1).realize()
    x.tanh().realize()
    (x.sin() * x).realize()
    uploads = [r for r in lt.transfer_log() if r.direction == "h2d"]
    assert len(uploads) == 1 and uploads[0].node_id == x._node.id
    stats = lt.residency_stats()
    assert stats["operand_misses"] == 1 and stats["operand_hits"] >= 2  # exp and +1 are one fused kernel


def test_element_reads_download_the_source_once(virtual, big):
    virtual()
    y = _resident(big)
    a, b = float(y[0, 0]), float(y[5, 7])
    assert (a, b) == (np.exp(big[0, 0].astype(np.float64)).astype(np.float32),
                      np.exp(big[5, 7].astype(np.float64)).astype(np.float32))
    downloads = [r for r in lt.transfer_log() if r.direction == "d2h"]
    assert len(downloads) == 1 and downloads[0].reason == "host-read:getitem"
    assert y.residency is Residency.BOTH


def test_host_write_to_a_device_only_tensor_downloads_once_and_forgets_the_device_copy(virtual, big):
    device = virtual()
    y = _resident(big)
    before = device.memory.resident_bytes
    lt.clear_transfer_log()
    y[0, 0] = 42.0
    log = lt.transfer_log()
    assert [(r.direction, r.reason) for r in log] == [("d2h", "setitem")]
    assert y.residency is Residency.HOST
    assert device.memory.resident_bytes < before
    assert y[0, 0].item() == 42.0 and y[0, 1].item() == np.float32(np.exp(np.float64(big[0, 1])))
    assert len(lt.transfer_log()) == 1


def test_a_write_leaves_tensors_derived_on_the_device_unchanged(virtual, big):
    virtual()
    y = _resident(big)
    z = (y * 2).realize()
    y[0, 0] = -1
    assert z[0, 0].item() == np.float32(np.exp(np.float64(big[0, 0])) * 2)


def test_dropping_tensors_frees_their_device_memory(virtual, big):
    device = virtual()
    baseline = device.memory.resident_bytes
    ys = [_resident(big) + float(i) for i in range(5)]
    lt.realize(*ys)
    assert device.memory.resident_bytes > baseline
    del ys
    gc.collect()
    assert device.memory.resident_bytes == baseline


def test_transfer_log_totals_equal_the_records_and_the_stats(virtual, big):
    virtual(budget=3 * N * 4 + 4096)
    xs = [lt.tensor(big + i).exp() for i in range(5)]
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    total.numpy()
    xs[2].numpy()
    log = lt.transfer_log()
    stats = lt.residency_stats()
    assert stats["upload_bytes"] == sum(r.nbytes for r in log if r.direction == "h2d")
    assert stats["download_bytes"] == sum(r.nbytes for r in log if r.direction == "d2h")
    assert stats["uploads"] + stats["downloads"] == len(log)
    assert [r.seq for r in log] == list(range(len(log)))


def test_eviction_downloads_before_it_frees_and_values_survive(virtual, big):
    device = virtual(budget=2 * N * 4 + 1024)
    xs = [_resident(big + i) for i in range(4)]  # four device results, room for two
    evicted = [r for r in lt.transfer_log() if r.reason == "eviction"]
    assert evicted and all(r.direction == "d2h" for r in evicted)
    assert device.memory.resident_bytes <= device.memory.budget
    for i, x in enumerate(xs):
        np.testing.assert_array_equal(x.numpy(), np.exp((big + i).astype(np.float64)).astype(np.float32))


def test_lowering_the_budget_evicts_at_once(virtual, big):
    device = virtual()
    ys = [_resident(big + i) for i in range(3)]
    lt.set_memory_budget(N * 4 + 1024)
    assert device.memory.resident_bytes <= N * 4 + 1024
    assert sum(y.residency in (Residency.HOST, Residency.BOTH) for y in ys) >= 2
    assert [r.reason for r in lt.transfer_log() if r.direction == "d2h"].count("eviction") == 2


def test_a_budget_of_none_restores_the_default_for_this_device_and_later_ones(virtual, monkeypatch):
    monkeypatch.delenv("LAZYTENSOR_MEMORY_BUDGET", raising=False)
    virtual(memory="64MB")
    default = lt.memory_budget()
    assert lt.set_memory_budget("1MB") == 10 ** 6 and lt.memory_budget() == 10 ** 6
    assert lt.set_memory_budget(None) == default == 64 * 10 ** 6 // 4  # a quarter of the free memory
    lt.set_memory_budget("1MB")
    lt.set_memory_budget(None)
    virtual(memory="64MB")
    assert lt.memory_budget() == default  # a device started later gets the default too


def test_a_budget_of_none_on_the_cpu_is_no_budget():
    lt.set_device("cpu")
    assert lt.set_memory_budget(None) is None and lt.memory_budget() is None


@pytest.mark.filterwarnings("ignore:a memory budget of")  # the device smaller than its budget, on purpose
def test_out_of_memory_in_a_tiny_arena_degrades_to_eviction_or_the_cpu(virtual, big):
    device = virtual(memory="300KB", budget="1GB")  # budget larger than the arena: the arena runs out
    x = lt.tensor(big)
    ys = [(x + i).exp() for i in range(4)]
    got = [y.numpy() for y in ys]
    for i, g in enumerate(got):
        np.testing.assert_array_equal(g, np.exp((big + i).astype(np.float64)).astype(np.float32))
    m = device.memory
    assert m.evictions + m.memory_fallbacks > 0


def test_a_kernel_bigger_than_the_budget_runs_on_the_cpu(virtual, big):
    virtual(budget="64KB")
    y = lt.tensor(big).exp()
    y.realize()
    assert y.residency is Residency.HOST and lt.transfer_log() == []


def test_a_kernel_bigger_than_the_budget_names_the_smallest_budget_that_runs_it_on_the_device(virtual, rng):
    a = rng.standard_normal((256, 256)).astype(np.float32)  # 256 KiB: a product holds three of them
    virtual(budget="100KB", offload="always")
    with lt.profile() as p:
        lt.tensor(a).matmul(lt.tensor(a)).realize()
    need = lt.residency_stats()["devices"]["virtual"]["largest_refused_bytes"]
    assert need >= 3 * a.nbytes and p.stats["devices"]["virtual"]["memory_fallbacks"] >= 1
    text = p.summary(file=io.StringIO())
    assert "a budget of at least that runs it on virtual" in text and f"{need:,} B" in text
    lt.set_memory_budget(need)  # the budget it names: the same product now runs on the device
    assert lt.residency_stats()["devices"]["virtual"]["largest_refused_bytes"] == 0
    with lt.profile() as p:
        y = lt.tensor(a).matmul(lt.tensor(a))
        y.realize()
    assert p.stats["devices"]["virtual"]["memory_fallbacks"] == 0 and y.residency is not Residency.HOST


def test_downloads_reuse_pinned_staging_blocks(virtual, big):
    device = virtual()
    for i in range(3):
        y = _resident(big + i)
        y.numpy()
        del y
        gc.collect()
    assert device.pinned_pool.reuses >= 2


def test_illegal_residency_transitions_assert():
    buf = Buffer(0, "data", (2,), np.float32).set_host_result(np.zeros(2, np.float32), True)
    with pytest.raises(AssertionError):
        buf.add_host_copy(np.zeros(2, np.float32))  # already on the host
    with pytest.raises(AssertionError):
        buf.drop_device_copy()  # no device copy
    with pytest.raises(AssertionError):
        buf.set_host_result(np.zeros(2, np.float32), True)  # not pending


@pytest.mark.parametrize("exclusive", [True, False])
def test_a_host_result_buffer_is_what_the_pending_to_host_transition_makes(exclusive):
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    made = Buffer.host_result(7, "mul", array, exclusive)
    stepped = Buffer(7, "mul", array.shape, array.dtype).set_host_result(array, exclusive)
    assert made.host is array and stepped.host is array
    for field in ("device", "backend", "state", "host_exclusive", "node_id", "op", "shape", "dtype"):
        assert getattr(made, field) == getattr(stepped, field), field
    assert made.on_host and not made.on_device and made.host_exclusive is exclusive
    with pytest.raises(AssertionError):
        made.set_host_result(array, exclusive)  # not pending


def test_offload_always_runs_every_kernel_on_the_device_with_identical_bytes(virtual, rng):
    a, b = rng.normal(size=(3, 4)), rng.normal(size=(4,))

    def program():
        return ((lt.tensor(a) + lt.tensor(b)).softmax(-1) - lt.tensor(a).mean()).sum(0)[::-1].numpy()

    want = program()
    virtual(offload="always")
    with lt.profile() as p:
        got = program()
    assert got.tobytes() == want.tobytes()
    assert set(p.stats["kernels_by_backend"]) == {"virtual"}


def test_explicit_placement_puts_small_creations_on_the_device(virtual):
    virtual()
    a = lt.zeros(10, device="virtual").realize()
    b = lt.ones(10).realize()  # the policy alone keeps 10 elements on the host
    c = lt.full((4,), 2.0, device="cpu").realize()
    assert a.residency is lt.Residency.DEVICE and b.residency is lt.Residency.HOST and c.device == "cpu"
    assert b.device == "virtual"  # it belongs to the active device; the engine chose to compute it on the host
    assert lt.zeros_like(a).realize().residency is lt.Residency.DEVICE  # *_like follows its source
    assert lt.transfer_log() == []


def test_to_device_and_back(virtual):
    virtual()
    t = lt.tensor([1.0, 2.0, 3.0])
    assert t.to("virtual") is t and t.device == "virtual" and t.residency is lt.Residency.BOTH
    t.to("cpu")
    assert t.device == "cpu" and t.residency is lt.Residency.HOST
    assert [r.reason for r in lt.transfer_log()] == ["to-device"]


def test_a_device_that_is_not_active_gets_a_notice_and_the_value_stays_on_the_host(capsys):
    lt.set_device("cpu")
    lt.runtime.devices._state["noticed"].clear()
    t = lt.tensor([1.0]).to("cuda:0")
    assert t.device == "cpu" and t.tolist() == [1.0]
    err = capsys.readouterr().err  # the reason where CUDA is missing, how to select it where it is not active
    assert "device 'cuda' is not available" in err or "device 'cuda' is available but not the active device" in err


def test_a_host_result_is_exclusive_only_when_it_owns_memory_no_operand_reaches():
    """A later in-place write may reuse a kernel's result only when no operand shares its memory: a
    fresh array is exclusive; an operand handed back, the owner of an operand's view, a view of an
    operand or a read-only array are not."""
    a = np.arange(12.0)
    view = a[2:].reshape(2, 5)[:, 1:]
    assert exclusive_result(a * 2, [a, view])
    assert not exclusive_result(a, [a])            # the kernel returned its operand
    assert not exclusive_result(a, [view])         # ... the memory under an operand's view
    assert not exclusive_result(view.T, [a])       # ... a view (of anything)
    frozen = a * 2
    frozen.flags.writeable = False
    assert not exclusive_result(frozen, [])


def test_residency_stats_print_as_a_labelled_summary_and_stay_a_dict(virtual):
    virtual()
    (lt.ones(64, 64) @ lt.ones(64, 64)).sum().item()
    stats = lt.residency_stats()
    assert isinstance(stats, dict) and stats["downloads"] >= 1 and "virtual" in stats["devices"]
    text = str(stats)
    assert text.startswith("copies: ") and "\ntensors: " in text and "\nvirtual: " in text and "peak" in text
    assert repr(stats) == text


def test_the_transfer_log_names_the_parameters_a_copy_moved(virtual):
    import io
    virtual(offload="always")
    model = lt.nn.Sequential(lt.nn.Linear(4, 3), lt.nn.Tanh(), lt.nn.Linear(3, 2))
    opt = lt.optim.AdamW(model.parameters())
    for _ in range(2):
        model(lt.ones(5, 4)).sum().backward()
        opt.step()
        opt.zero_grad()
    lt.save(model.state_dict(), io.BytesIO())  # every parameter read to the host
    saved = [r for r in lt.transfer_log() if r.reason == "save"]
    assert sorted(r.name for r in saved) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert all(r.name == "" for r in lt.transfer_log() if r.reason.startswith("host-read"))
