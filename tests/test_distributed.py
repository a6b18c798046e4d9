"""lazytensor.distributed under `mpiexec -n 2` (tests/mpi_worker.py runs on every rank): collectives on
every dtype and on the virtual device with their transfer-log reasons, DistributedDataParallel keeping
the ranks byte-identical and matching one process with the combined batch, and a failing rank ending
the whole job instead of leaving the others waiting."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "mpi_worker.py")
from training_processes import HAVE_MPI, MPIEXEC, needs_mpi


def _mpiexec(n, *args, timeout=120):
    start = time.perf_counter()
    done = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, WORKER, *args], capture_output=True, text=True,
                          timeout=timeout)
    return done, time.perf_counter() - start


@pytest.fixture(scope="module")
def collectives_report(tmp_path_factory):
    if not HAVE_MPI:
        pytest.skip("needs mpi4py and mpiexec")
    out = tmp_path_factory.mktemp("collectives")
    done, _ = _mpiexec(2, "collectives", str(out))
    assert done.returncode == 0, done.stderr
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


@needs_mpi
def test_collectives_give_the_expected_values_on_every_rank_dtype_and_device(collectives_report):
    for report in collectives_report:
        assert report["size"] == 2
        failed = [name for name, ok in report["checks"].items() if not ok]
        assert failed == [] and len(report["checks"]) >= 50


@needs_mpi
def test_a_device_only_value_goes_down_for_the_collective_and_its_result_back_up_logged(collectives_report):
    for report in collectives_report:
        assert report["device-only before"] == "device" and report["after"] == "both"
        assert report["virtual reasons"] == [["d2h", "collective"], ["h2d", "collective-result"]]
        assert report["cpu reasons"] == []  # on the CPU nothing crosses


@needs_mpi
def test_a_profile_shows_collectives_as_mpi_time(collectives_report):
    assert all(report["profile mpi kernels"] == 1 for report in collectives_report)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    if not HAVE_MPI:
        pytest.skip("needs mpi4py and mpiexec")
    two, one = tmp_path_factory.mktemp("two"), tmp_path_factory.mktemp("one")
    for n, batch, out in ((2, 8, two), (1, 16, one)):
        done, _ = _mpiexec(n, "train", str(out), str(batch))
        assert done.returncode == 0, done.stderr
    return [np.load(two / "rank0.npz"), np.load(two / "rank1.npz")], np.load(one / "rank0.npz")


@needs_mpi
def test_data_parallel_parameters_are_byte_identical_on_every_rank_after_20_steps(trained):
    (r0, r1), _ = trained
    params = [k for k in r0.files if k != "losses"]
    assert params and all(r0[k].tobytes() == r1[k].tobytes() for k in params)
    assert not np.array_equal(r0["losses"], r1["losses"])  # each rank trained on its own samples


@needs_mpi
def test_two_ranks_of_batch_b_match_one_process_of_batch_2b(trained):
    """Same samples, same initial weights (rank 0's, broadcast). The averaged gradient is (g0 + g1) / 2
    rounded once, where one process rounds its batch mean in another order, so the values differ by
    float32 rounding only: tolerance 1e-6 absolute after 20 AdamW steps (measured: 6e-8)."""
    (r0, r1), single = trained
    for k in r0.files:
        if k != "losses":
            np.testing.assert_allclose(r0[k], single[k], rtol=0, atol=1e-6)
    np.testing.assert_allclose((r0["losses"] + r1["losses"]) / 2, single["losses"], rtol=0, atol=1e-6)


@needs_mpi
def test_a_compiled_data_parallel_step_replays_its_collectives_with_the_eager_bytes(tmp_path):
    done, _ = _mpiexec(2, "train_compiled", str(tmp_path))
    assert done.returncode == 0, done.stderr
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert all(r["same"] and r["replayed"] == 10 for r in reports)
    assert reports[0]["params"] == reports[1]["params"]


@needs_mpi
@pytest.mark.parametrize("how", ["raises", "dies"])
def test_a_failing_rank_ends_the_whole_job_within_60_seconds(tmp_path, how):
    done, seconds = _mpiexec(2, "fault", str(tmp_path), how, timeout=90)
    assert done.returncode != 0 and seconds < 60
    if how == "raises":
        assert "rank 1 of 2 failed (RuntimeError: rank 1 fails on purpose); aborting every rank" in done.stderr


@needs_mpi
def test_a_checkpoint_written_before_a_rank_fails_resumes_to_the_uninterrupted_bytes(tmp_path):
    failed, _ = _mpiexec(2, "fault_then_resume", str(tmp_path), "fail")
    assert failed.returncode != 0 and "(RuntimeError: rank 1 fails after the checkpoint)" in failed.stderr
    assert (tmp_path / "ck.npz").exists()
    for phase in ("resume", "straight"):
        done, _ = _mpiexec(2, "fault_then_resume", str(tmp_path), phase)
        assert done.returncode == 0, done.stderr
    resumed, straight = np.load(tmp_path / "resume0.npz"), np.load(tmp_path / "straight0.npz")
    assert all(resumed[k].tobytes() == straight[k].tobytes() for k in straight.files)


class _CommThatRecordsAborts:
    rank, size = 1, 2

    def __init__(self):
        self.aborted = []

    def abort(self, code):
        self.aborted.append(code)


def test_a_failing_rank_names_its_exception_in_the_one_line_before_aborting(monkeypatch, capsys):
    """The abort ends mpiexec's output forwarding at once: the cause must be in the first line, written
    together with the traceback, or it can be lost (it was, once)."""
    comm = _CommThatRecordsAborts()
    monkeypatch.setattr(sys, "excepthook", lambda *exc: None)
    dist._install_abort_hook(comm)
    try:
        raise ValueError("bad shard\nsecond line")
    except ValueError as e:
        sys.excepthook(type(e), e, e.__traceback__)
    first, *rest = capsys.readouterr().err.splitlines()
    assert first == "lazytensor.distributed: rank 1 of 2 failed (ValueError: bad shard); aborting every rank"
    assert rest[0].startswith("Traceback") and rest[-2:] == ["ValueError: bad shard", "second line"]
    assert comm.aborted == [1]


def test_collectives_before_init_say_what_to_call():
    if dist.is_initialized():
        pytest.skip("this process joined an MPI job")
    with pytest.raises(RuntimeError, match=r"call dist.init\(\) first"):
        dist.all_reduce(lt.tensor([1.0]))


def test_a_bad_reduction_is_refused_at_the_call():
    with pytest.raises(ValueError, match="op must be one of sum, mean, max, min"):
        dist.all_reduce(lt.tensor([1.0]), op="avg")
    with pytest.raises(TypeError, match="expected a lazytensor Tensor"):
        dist.all_reduce(np.ones(3))


def _train(cwd, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "lazytensor_train", "train", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


@needs_mpi
def test_lazytensor_train_on_two_ranks_reports_once_writes_once_and_resumes_on_one(tmp_path):
    ck = tmp_path / "ck.npz"
    common = ["--steps", "6", "--log-every", "2", "--eval-every", "100", "--eval-iters", "2", "--sample-chars", "0"]
    two = _train(tmp_path, "--nproc", "2", *common, "--checkpoint", str(ck), "--checkpoint-every", "3")
    assert two.returncode == 0, two.stderr
    lines = two.stdout.splitlines()
    headers = [line for line in lines if line.startswith("lazytensor train:")]
    assert len(headers) == 1  # rank 0 alone prints (after a note on compiling kernels, on a fresh machine)
    assert "on each of 2 data-parallel ranks" in headers[0] and "compiled step" in headers[0]
    assert len([line for line in lines if line.startswith("step ")]) == 4 and ck.exists()
    one = _train(tmp_path, "--steps", "8", "--resume", str(ck), "--log-every", "1", "--eval-iters", "2",
                 "--sample-chars", "0")
    assert one.returncode == 0, one.stderr
    assert "resuming at step 6" in one.stdout and "step     7 |" in one.stdout


def test_nproc_below_one_is_refused_with_the_flag_named(tmp_path):
    done = _train(tmp_path, "--nproc", "0", "--steps", "1")
    assert done.returncode == 2 and "--nproc 0: give at least 1 process" in done.stderr


@needs_mpi
def test_a_pytorch_data_parallel_script_runs_under_mpiexec_with_its_imports_changed(tmp_path):
    script = os.path.join(HERE, "mpi_torch_style.py")
    done = subprocess.run([MPIEXEC, "-n", "2", sys.executable, script, str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert ranks[0]["world"] == 2 and ranks[0]["params"] == ranks[1]["params"]  # byte-identical replicas
    assert list(ranks[0]["params"]) == ["module.0.weight", "module.0.bias", "module.2.weight", "module.2.bias"]
    assert ranks[0]["losses"] == ranks[1]["losses"] and ranks[0]["losses"][-1] < ranks[0]["losses"][0]
    assert ranks[0]["grads"]["false"] != ranks[1]["grads"]["false"]  # require_backward_grad_sync=False: local
    assert ranks[0]["grads"]["true"] == ranks[1]["grads"]["true"]  # and True: averaged


def test_init_process_group_refuses_a_torchrun_start_naming_mpiexec(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(dist, "launched_by_mpi", lambda: False)
    with pytest.raises(RuntimeError, match=r"mpiexec -n 2 python"):
        dist.init_process_group("nccl")


def test_the_distributed_sampler_splits_and_pads_as_pytorchs():
    torch = pytest.importorskip("torch")
    from lazytensor.utils.data.distributed import DistributedSampler
    for n, replicas, drop in ((10, 3, False), (10, 3, True), (8, 4, False)):
        for r in range(replicas):
            ours = list(DistributedSampler(range(n), num_replicas=replicas, rank=r, shuffle=False, drop_last=drop))
            theirs = list(torch.utils.data.distributed.DistributedSampler(range(n), num_replicas=replicas, rank=r,
                                                                           shuffle=False, drop_last=drop))
            assert ours == theirs
    shares = [set(DistributedSampler(range(12), num_replicas=3, rank=r, seed=5)) for r in range(3)]
    assert set.union(*shares) == set(range(12)) and sum(map(len, shares)) == 12


LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
                    "MPI_LOCALNRANKS", "PMIX_RANK", "PMIX_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")


@pytest.fixture
def no_launcher(monkeypatch):
    """None of the launchers' or torchrun's variables, and each restored after the test (including the
    ones the code under test sets)."""
    for name in LAUNCH_VARIABLES:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    return monkeypatch


@pytest.mark.parametrize("launcher", [
    {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"},  # MPICH's Hydra
    {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
     "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}])  # Open MPI
def test_a_rank_started_by_mpiexec_gets_torchruns_variables(no_launcher, launcher):
    for name, value in launcher.items():
        no_launcher.setenv(name, value)
    dist._torchrun_variables()
    assert [os.environ[n] for n in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")] == ["1", "2", "1", "2"]


def test_torchruns_variables_a_user_set_are_kept_and_a_single_process_gets_none(no_launcher):
    no_launcher.setenv("PMI_RANK", "1")
    no_launcher.setenv("PMI_SIZE", "2")
    no_launcher.setenv("RANK", "7")
    dist._torchrun_variables()
    assert os.environ["RANK"] == "7" and os.environ["WORLD_SIZE"] == "2"
    for name in LAUNCH_VARIABLES:
        no_launcher.delenv(name, raising=False)
    dist._torchrun_variables()
    assert "RANK" not in os.environ and "WORLD_SIZE" not in os.environ
