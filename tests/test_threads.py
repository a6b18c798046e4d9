"""CPU threads and host memory: kernels split between threads give the bytes they give on one thread;
BLAS is held to one thread only while the engine splits kernels; malloc is tuned at import."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor import nn
from lazytensor.runtime import parallel

threadpoolctl = pytest.importorskip("threadpoolctl")


@pytest.fixture
def threads(monkeypatch):
    """lt.set_num_threads, restored afterwards; kernels split from 1,024 elements of work (not ~262k);
    the CPU backends (threads are theirs)."""
    lt.set_device("cpu")
    monkeypatch.setattr(parallel, "MIN_SPLIT", 1024)
    before = parallel._state["threads"]
    yield lt.set_num_threads
    parallel._state["threads"] = before


def _program(x, w, g):
    """Softmax, layer norm and their gradients, a fused chain, folds, amax, erf and an AdamW step."""
    x = lt.tensor(x, requires_grad=True)
    w = nn.Parameter(lt.tensor(w))
    y = nn.functional.layer_norm(x, x.shape[-1]) * w
    z = (y.softmax(-1) * 3.0 + y.erf()).log_softmax(0)
    z.backward(lt.tensor(g))
    opt = lt.optim.AdamW([w], lr=1e-2)
    opt.step()
    return [z, x.grad, w, y.sum((0, 1)), y.sum(-1), y.amax(-1), y.mean(0)]


def test_split_kernels_give_the_one_thread_bytes(threads, rng):
    x = rng.standard_normal((64, 48, 96)).astype(np.float32)
    w = rng.standard_normal(96).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    results = {}
    split = parallel.split
    for n in (1, 2, 3):
        threads(n)
        outs = _program(x, w, g)
        pieces = []
        parallel.split = lambda fn, size, work=1: pieces.append(len(parallel.ranges(size, work))) or split(fn, size, work)
        try:
            lt.realize(*outs)
        finally:
            parallel.split = split
        results[n] = [t.numpy().copy() for t in outs]
        assert pieces and max(pieces) == n
    for n in (2, 3):
        for a, b in zip(results[1], results[n]):
            assert a.tobytes() == b.tobytes()


def test_split_matmul_is_within_the_matmul_tolerance(threads, rng):
    a = rng.standard_normal((8, 300, 64)).astype(np.float32)
    b = rng.standard_normal((64, 200)).astype(np.float32)
    c = rng.standard_normal((8, 64, 100)).astype(np.float32)
    threads(2)
    with lt.profile() as p:
        got = [(lt.tensor(a) @ lt.tensor(b)).numpy(), (lt.tensor(a) @ lt.tensor(c)).numpy()]
    assert [k.backend for k in p.kernels if k.op == "matmul"] == ["numba", "numba"]
    for out, want in zip(got, (a.astype(np.float64) @ b, a.astype(np.float64) @ c)):
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


def _numpy_blas_threads():
    """Threads of the BLAS NumPy uses (not, say, PyTorch's, which another test may have loaded)."""
    return [i["num_threads"] for i in threadpoolctl.threadpool_info()
            if i["user_api"] == "blas" and "numpy" in i["filepath"]]


def test_blas_is_held_to_one_thread_only_while_kernels_run(threads, rng):
    threads(2)
    before = _numpy_blas_threads()
    seen = []
    a = lt.tensor(rng.standard_normal((256, 256)).astype(np.float32))
    y = (a @ a).exp()
    original = parallel.split

    def spy(fn, n, work=1):
        seen.append(_numpy_blas_threads())
        return original(fn, n, work)
    parallel.split = spy
    try:
        y.numpy()
    finally:
        parallel.split = original
    assert parallel._state["depth"] == 0
    assert before and seen and all(s == [1] * len(before) for s in seen)
    assert _numpy_blas_threads() == before


def test_runs_of_small_kernels_are_not_split_and_leave_blas_alone(threads, monkeypatch, rng):
    threads(2)
    monkeypatch.setattr(parallel, "MIN_SPLIT", 1 << 20)
    seen = []
    split = parallel.split
    monkeypatch.setattr(parallel, "split", lambda fn, n, work=1: seen.append(_numpy_blas_threads()) or split(fn, n, work))
    a = lt.tensor(rng.standard_normal((256, 256)))  # float64: float32 products this size go to BLIS
    with lt.profile() as p:
        ((a @ a).softmax(-1)).numpy()
    assert [k.backend for k in p.kernels] == ["numpy", "numba"]  # the product left to NumPy's BLAS
    assert seen and all(s == _numpy_blas_threads() for s in seen)


def test_set_num_threads_rejects_what_is_not_a_positive_integer():
    for bad in (0, -2, 1.5, "2", True):
        with pytest.raises(ValueError, match="positive integer"):
            lt.set_num_threads(bad)


@pytest.mark.parametrize("setting,applied", [("", None), ("default", None), ("tuned", True)])
def test_importing_leaves_malloc_alone_unless_told_to_tune_it(setting, applied):
    import os
    import subprocess
    import sys
    if not sys.platform.startswith("linux"):
        pytest.skip("mallopt is glibc's")
    env = dict(os.environ, LAZYTENSOR_MALLOC=setting)
    out = subprocess.run([sys.executable, "-c", "import lazytensor.runtime.host_malloc as m, lazytensor; "
                          "print(m._applied['value'])"], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == str(applied)


@pytest.mark.parametrize("setting,applied", [("", True), ("default", None)])
def test_the_training_command_tunes_malloc_unless_told_to_leave_it(setting, applied):
    import os
    import subprocess
    import sys
    if not sys.platform.startswith("linux"):
        pytest.skip("mallopt is glibc's")
    env = dict(os.environ, LAZYTENSOR_MALLOC=setting)
    program = ("import lazytensor.runtime.host_malloc as m; from lazytensor import cli; "
               "cli.main(['train', '--steps', '1', '--eval-iters', '1', '--sample-chars', '0']); "
               "print(m._applied['value'])")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip().splitlines()[-1] == str(applied)


def test_tune_host_malloc_applies_once_on_request():
    import os
    import subprocess
    import sys
    if not sys.platform.startswith("linux"):
        pytest.skip("mallopt is glibc's")
    env = {k: v for k, v in os.environ.items() if k != "LAZYTENSOR_MALLOC"}
    out = subprocess.run([sys.executable, "-c", "import lazytensor as lt; print(lt.tune_host_malloc(), "
                          "lt.tune_host_malloc())"], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["True", "True"]


def test_an_error_in_a_worker_piece_reaches_the_caller_and_the_workers_recover(threads):
    threads(2)
    parallel._state["depth"] += 1
    parallel._state["owner"] = __import__("threading").get_ident()
    try:
        def boom(lo, hi):
            if lo > 0:
                raise ZeroDivisionError("piece failed")
        with pytest.raises(ZeroDivisionError, match="piece failed"):
            parallel.split(boom, 1 << 20)
        seen = []
        parallel.split(lambda lo, hi: seen.append((lo, hi)), 1 << 20)
        assert sorted(seen) == [(0, 1 << 19), (1 << 19, 1 << 20)]
    finally:
        parallel._state["depth"] -= 1
        parallel._state["owner"] = None


def test_another_thread_never_shares_the_workers_of_a_running_split(threads):
    import threading
    threads(2)
    parallel._state["depth"] += 1
    parallel._state["owner"] = threading.get_ident()
    try:
        pieces = []
        t = threading.Thread(target=lambda: pieces.append(parallel.ranges(1 << 20)))
        t.start()
        t.join()
        assert pieces == [[(0, 1 << 20)]] and len(parallel.ranges(1 << 20)) == 2
    finally:
        parallel._state["depth"] -= 1
        parallel._state["owner"] = None


def test_training_steps_with_split_kernels_track_the_one_thread_losses(threads, monkeypatch):
    from lazytensor.data import CharDataset, default_corpus
    from lazytensor.train import TrainConfig, build, train_step
    data = CharDataset(default_corpus()[:20000])
    losses = {}
    split = parallel.split
    for n in (1, 2):
        threads(n)
        lt.manual_seed(0)
        model, opt, _ = build(TrainConfig(config="tiny", steps=3), data)
        params = list(model.parameters())
        lt.manual_seed(1)
        pieces = []
        with monkeypatch.context() as m:
            m.setattr(parallel, "split", lambda fn, size, work=1: pieces.append(len(parallel.ranges(size, work)))
                      or split(fn, size, work))
            losses[n] = [train_step(model, opt, params, *data.batch("train", 4, 64), 1.0).item() for _ in range(3)]
        assert max(pieces) == n
    # split matmuls may round differently; everything else is computed as on one thread
    np.testing.assert_allclose(losses[2], losses[1], rtol=1e-5)
