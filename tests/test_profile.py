"""lt.profile(): a block's copies, kernels and stats; summary table, JSON and Chrome trace exports."""
import json

import numpy as np
import pytest

import lazytensor as lt


def _workload(big):
    y = lt.tensor(big).exp()
    z = (y * 2).sum(1)
    return z.numpy()


def test_profile_scopes_transfers_and_kernels_to_the_block(virtual, rng):
    virtual()
    big = rng.normal(size=(512, 512)).astype(np.float32)
    _workload(big)
    with lt.profile() as p:
        _workload(big)
    assert [r.reason for r in p.transfers] == ["operand-upload", "host-read:numpy"]
    assert p.stats["uploads"] == 1 and p.stats["downloads"] == 1
    assert p.stats["upload_bytes"] == big.nbytes and p.stats["download_bytes"] == 512 * 4
    assert {k.op for k in p.kernels} == {"fused(exp+mul)", "sum"}  # the exp and the product in one kernel
    assert p.stats["kernels_by_backend"]["virtual"] == 2
    assert p.stats["devices"]["virtual"]["peak_bytes"] >= 2 * big.nbytes


def test_a_profile_without_kernel_records_keeps_the_copies_and_counts_the_kernels(virtual, rng):
    virtual()
    big = rng.normal(size=(512, 512)).astype(np.float32)
    _workload(big)
    with lt.profile(kernels=False) as p:
        _workload(big)
    assert [r.reason for r in p.transfers] == ["operand-upload", "host-read:numpy"]
    assert p.kernels == [] and p.stats["kernels"] == 2
    assert "2 launches (not timed" in p.summary()


def test_summary_prints_a_table_by_reason(virtual, rng, capsys):
    virtual()
    with lt.profile() as p:
        _workload(rng.normal(size=(512, 512)).astype(np.float32))
    text = p.summary()
    assert text in capsys.readouterr().out
    assert "operand-upload" in text and "host-read:numpy" in text and "virtual" in text
    assert "1,048,576" in text


def test_json_and_chrome_trace_exports(virtual, rng, tmp_path):
    virtual()
    with lt.profile() as p:
        _workload(rng.normal(size=(512, 512)).astype(np.float32))
    p.to_json(tmp_path / "p.json")
    data = json.loads((tmp_path / "p.json").read_text())
    assert len(data["transfers"]) == 2 and data["stats"]["uploads"] == 1
    p.to_chrome_trace(tmp_path / "trace.json")
    trace = json.loads((tmp_path / "trace.json").read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in spans} == {"kernel", "h2d", "d2h"}
    lanes = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert {"kernels:virtual", "copies:virtual"} <= lanes
    assert all(e["dur"] > 0 and e["ts"] >= 0 for e in spans)


def test_residency_stats_count_tensors_per_state(virtual, rng):
    virtual()
    big = rng.normal(size=(256, 256)).astype(np.float32)
    pending = lt.tensor(big) + 1
    on_device = lt.tensor(big).exp().realize()
    both = lt.tensor(big).tanh().realize()
    both.numpy()
    counts = lt.residency_stats()["tensors"]
    assert counts["pending"] >= 1 and counts["device"] >= 1 and counts["both"] >= 1 and counts["host"] >= 0
    del pending, on_device, both


def test_residency_stats_report_budget_and_peak(virtual, rng):
    virtual(budget="8MB")
    kept = lt.tensor(rng.normal(size=(512, 512)).astype(np.float32)).exp().realize()
    dev = lt.residency_stats()["devices"]["virtual"]
    assert dev["budget"] == 8_000_000 and dev["peak_bytes"] >= 2 * 2 ** 20 and dev["bytes_resident"] > 0
    del kept


def _uploads(n, rng):
    """n programs whose operand (a fresh 64 KiB array each) is uploaded to the virtual device."""
    for _ in range(n):
        (lt.tensor(rng.normal(size=(128, 128)).astype(np.float32)).exp() * 2).sum(1).numpy()


def test_transfer_log_keeps_the_newest_records_and_counts_every_copy(virtual, rng):
    virtual(offload="always")
    capacity = lt.transfer_log_capacity()
    lt.set_transfer_log_capacity(4)
    try:
        _uploads(10, rng)
        log, stats = lt.transfer_log(), lt.residency_stats()
        assert len(log) == 4
        assert stats["uploads"] + stats["downloads"] == log[-1].seq + 1 == 4 + stats["transfer_records_dropped"]
        assert stats["uploads"] == 10 and stats["upload_bytes"] == 10 * 128 * 128 * 4
    finally:
        lt.set_transfer_log_capacity(capacity)


def test_profile_totals_and_summary_stay_exact_when_records_are_dropped(virtual, rng):
    virtual(offload="always")
    capacity = lt.transfer_log_capacity()
    lt.set_transfer_log_capacity(3)
    try:
        with lt.profile() as p:
            _uploads(10, rng)
    finally:
        lt.set_transfer_log_capacity(capacity)
    assert len(p.transfers) == 3 and len(p.kernels) == 3
    assert p.stats["uploads"] == 10 and p.stats["downloads"] == 10
    assert p.stats["kernels_by_backend"] == {"virtual": 20}  # the fused exp and product, the sum, each time
    assert p.stats["records_dropped"] == {"transfers": 17, "kernels": 17}
    text = p.summary(file=open("/dev/null", "w"))
    assert "operand-upload" in text and "     10" in text
    assert "oldest 17 copy records and 17 kernel records were not kept" in text


def test_transfer_log_capacity_rejects_a_negative_size():
    with pytest.raises(ValueError, match="non-negative"):
        lt.set_transfer_log_capacity(-1)
