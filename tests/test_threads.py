"""CPU threads and host memory: kernels run in pieces on numba's threads give the bytes they give on one
thread; BLAS is held to one thread from the first split run until set_num_threads(1); malloc is tuned
on request."""
import os

import numpy as np
import pytest

import lazytensor as lt
from lazytensor import nn
import lazytensor.nn.functional as F
from lazytensor.kernels.cpu import blas, pool
from lazytensor.kernels.cpu import movement as cpu_movement
from lazytensor.kernels.cpu import reduce as cpu_reduce
from lazytensor.runtime import parallel

threadpoolctl = pytest.importorskip("threadpoolctl")


@pytest.fixture
def threads(monkeypatch):
    """lt.set_num_threads, restored afterwards; kernels split from 1,024 elements of work per piece (not
    ~32k); the CPU backends (threads are theirs). Skips where numba's pool cannot run pieces."""
    lt.set_device("cpu")
    monkeypatch.setattr(parallel, "MIN_PIECE", 1024)
    before = parallel._state["threads"]
    lt.set_num_threads(2)
    if lt.get_num_threads() < 2:
        parallel._state["threads"] = before
        pytest.skip(f"numba's pool runs no pieces here (threading layer {parallel._state['layer']!r}, "
                    f"{pool.size()} threads)")
    yield lt.set_num_threads
    lt.set_num_threads(1)  # BLAS's threads restored
    parallel._state["threads"] = before


@pytest.fixture
def piece_counts(monkeypatch):
    """The number of pieces of every kernel cut while the test runs (1: run whole)."""
    counts = []
    pieces = parallel.pieces

    def counting(n, work=1):
        bounds = pieces(n, work)
        counts.append(1 if bounds is None else len(bounds) - 1)
        return bounds
    monkeypatch.setattr(parallel, "pieces", counting)
    return counts


def _program(x, w, g):
    """Softmax, layer norm and their gradients, a fused chain, folds, amax, erf, a random fill and an
    AdamW step."""
    x = lt.tensor(x, requires_grad=True)
    w = nn.Parameter(lt.tensor(w))
    y = nn.functional.layer_norm(x, x.shape[-1]) * w
    z = (y.softmax(-1) * 3.0 + y.erf()).log_softmax(0)
    z.backward(lt.tensor(g))
    opt = lt.optim.AdamW([w], lr=1e-2)
    opt.step()
    return [z, x.grad, w, y.sum((0, 1)), y.sum(-1), y.amax(-1), y.mean(0), lt.rand(x.shape)]


def test_kernels_in_pieces_give_the_one_thread_bytes(threads, piece_counts, rng):
    x = rng.standard_normal((64, 48, 96)).astype(np.float32)
    w = rng.standard_normal(96).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    results = {}
    for n in range(1, min(pool.size(), 3) + 1):
        threads(n)
        lt.manual_seed(0)
        outs = _program(x, w, g)
        piece_counts.clear()
        lt.realize(*outs)
        results[n] = [t.numpy().copy() for t in outs]
        assert piece_counts and max(piece_counts) == n
    for n in results:
        for a, b in zip(results[1], results[n]):
            assert a.tobytes() == b.tobytes()


def test_column_sums_split_only_into_pieces_of_many_columns(threads, monkeypatch, rng):
    """Threads summing parts of short rows ran slower than one thread summing whole rows: a sum over
    leading axes is cut into pieces of at least COLS_PER_PIECE columns (here only the wide one is),
    with the one-thread bytes."""
    widths = []
    in_pieces = cpu_reduce.sum_cols_in_pieces
    monkeypatch.setattr(cpu_reduce, "sum_cols_in_pieces",
                        lambda a, out, bounds: widths.append(np.diff(bounds).min()) or in_pieces(a, out, bounds))
    xs = [rng.standard_normal((64, cols)).astype(np.float32) for cols in (512, 3000)]
    results = {}
    for n in (1, 2):
        threads(n)
        results[n] = []
        for x in xs:
            t = lt.tensor(x)
            sums, _ = lt.realize(t.sum(0), t * 2.0)  # the multiply makes it a run that splits
            results[n].append(sums.numpy().tobytes())
    assert results[1] == results[2]
    assert len(widths) == 1 and widths[0] >= cpu_reduce.COLS_PER_PIECE


def test_a_transposed_piece_of_a_split_gradient_is_copied_in_pieces_with_the_one_thread_bytes(threads, monkeypatch,
                                                                                               rng):
    """q, k and v split from one projection, k read transposed by an elementwise op: its gradient comes
    transposed, and numba's threads copy it into place in pieces, giving the bytes one thread gives."""
    cuts = []
    in_pieces = cpu_movement.copy_rows_tiled_in_pieces
    monkeypatch.setattr(cpu_movement, "copy_rows_tiled_in_pieces",
                        lambda dst, src, bounds: cuts.append(len(bounds) - 1) or in_pieces(dst, src, bounds))
    x = rng.standard_normal((8, 64, 96)).astype(np.float32)
    w = rng.standard_normal((8, 32, 64)).astype(np.float32)
    results = {}
    for n in (1, 2):
        threads(n)
        qkv = lt.tensor(x, requires_grad=True)
        q, k, v = qkv.split(32, dim=2)
        ((k.transpose(-2, -1) * lt.tensor(w)).sum() + (q * v).sum()).backward()
        with lt.profile() as p:
            results[n] = qkv.grad.numpy().tobytes()
        assert [r.backend for r in p.kernels if r.op == "place_slices"] == ["numba"]
    assert cuts == [2]  # two threads only
    assert results[1] == results[2]


def test_hand_written_attention_computes_k_gradient_in_k_layout(threads, monkeypatch, rng):
    """Attention written by hand: k's gradient is a product read through a transpose; the product is
    laid out as k is (shape_ops asks its kernel), so it is placed as a dense piece, no tiled copy, with
    the bytes one thread gives."""
    cuts = []
    in_pieces = cpu_movement.copy_rows_tiled_in_pieces
    monkeypatch.setattr(cpu_movement, "copy_rows_tiled_in_pieces",
                        lambda dst, src, bounds: cuts.append(len(bounds) - 1) or in_pieces(dst, src, bounds))
    x = rng.standard_normal((8, 64, 96)).astype(np.float32)
    results = {}
    for n in (1, 2):
        threads(n)
        qkv = lt.tensor(x, requires_grad=True)
        q, k, v = qkv.split(32, dim=2)
        ((q @ k.transpose(-2, -1)).softmax(-1) @ v).sum().backward()
        results[n] = qkv.grad.numpy().tobytes()
    assert cuts == []
    assert results[1] == results[2]


def test_pieces_cover_the_range_once_in_order(threads):
    with parallel.kernels_session((), worth=True):
        for n, work in ((1 << 20, 1), (5, 1 << 20), (7, 1024)):
            bounds = parallel.pieces(n, work)
            assert bounds[0] == 0 and bounds[-1] == n and np.all(np.diff(bounds) > 0)
            assert len(bounds) - 1 == min(lt.get_num_threads(), n, n * work // parallel.MIN_PIECE)
        assert parallel.pieces(3, 1) is None  # less work than one piece: whole


def test_products_in_pieces_are_within_the_matmul_tolerance(threads, rng):
    a = rng.standard_normal((8, 300, 64)).astype(np.float32)
    b = rng.standard_normal((64, 200)).astype(np.float32)
    c = rng.standard_normal((8, 64, 100)).astype(np.float32)
    d = rng.standard_normal((8, 100, 64)).astype(np.float32)
    cases = [(a, b), (a, c), (a, b.T.copy().T), (a, d.transpose(0, 2, 1)), (a[:, ::2], c[..., ::3]),
             (a.transpose(0, 2, 1).copy().transpose(0, 2, 1), c)]
    if blas.gemm_address(np.float32) is None:
        pytest.skip("NumPy's BLAS here is not an OpenBLAS exporting cblas_sgemm")
    with lt.profile() as p:
        got = [(lt.tensor(l) @ lt.tensor(r)).numpy() for l, r in cases]
    assert [k.backend for k in p.kernels if k.op == "matmul"] == ["numba"] * len(cases)
    for out, (l, r) in zip(got, cases):
        np.testing.assert_allclose(out, l.astype(np.float64) @ r, rtol=1e-5, atol=1e-4)


def test_products_of_head_split_attention_operands_in_pieces_are_within_the_matmul_tolerance(threads, rng):
    """Batches whose dims cannot be merged without a copy (heads split out of a fused q, k, v
    projection, then transposed, as users write attention), and a broadcast batch."""
    if blas.gemm_address(np.float32) is None:
        pytest.skip("NumPy's BLAS here is not an OpenBLAS exporting cblas_sgemm")
    qkv = rng.standard_normal((4, 32, 3 * 48)).astype(np.float32)
    shared = rng.standard_normal((16, 32)).astype(np.float32)
    heads = [a.reshape(4, 32, 3, 16).transpose(0, 2, 1, 3) for a in np.split(qkv, 3, axis=2)]
    want = [heads[0].astype(np.float64) @ heads[1].transpose(0, 1, 3, 2),
            (heads[0].astype(np.float64) @ heads[1].transpose(0, 1, 3, 2)) @ heads[2],
            heads[0].transpose(0, 1, 3, 2).astype(np.float64) @ heads[2],
            heads[0].astype(np.float64) @ shared]
    with lt.profile() as p:
        q, k, v = (t.view(4, 32, 3, 16).transpose(1, 2) for t in lt.tensor(qkv).split(48, dim=2))
        att = q @ k.transpose(-2, -1)
        got = [t.numpy() for t in (att, att @ v, q.transpose(-2, -1) @ v,
                                   q @ lt.tensor(shared).expand(4, 3, 16, 32))]
    assert [kernel.backend for kernel in p.kernels if kernel.op == "matmul"] == ["numba"] * len(got)
    for out, expected in zip(got, want):
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)


def test_float64_products_in_pieces_match_numpy(threads, rng):
    a = rng.standard_normal((4, 100, 50))
    b = rng.standard_normal((50, 70))
    if blas.gemm_address(np.float64) is None:
        pytest.skip("NumPy's BLAS here is not an OpenBLAS exporting cblas_dgemm")
    np.testing.assert_allclose((lt.tensor(a) @ lt.tensor(b)).numpy(), a @ b, rtol=1e-12, atol=1e-12)


def _numpy_blas_threads():
    """Threads of the BLAS NumPy uses (not, say, PyTorch's, which another test may have loaded)."""
    return [i["num_threads"] for i in threadpoolctl.threadpool_info()
            if i["user_api"] == "blas" and "numpy" in i["filepath"]]


def test_blas_is_held_to_one_thread_from_a_split_run_until_one_thread_is_asked(threads, monkeypatch, rng):
    lt.set_num_threads(1)
    before = _numpy_blas_threads()
    threads(2)
    seen = []
    a = lt.tensor(rng.standard_normal((256, 256)).astype(np.float32))
    y = (a @ a).exp()
    pieces = parallel.pieces
    monkeypatch.setattr(parallel, "pieces", lambda n, work=1: seen.append(_numpy_blas_threads()) or pieces(n, work))
    y.numpy()
    assert parallel._state["depth"] == 0
    assert before and seen and all(s == [1] * len(before) for s in seen)
    assert _numpy_blas_threads() == [1] * len(before)  # held between runs: restoring woke its spinning threads
    lt.set_num_threads(1)
    assert _numpy_blas_threads() == before


def test_runs_of_small_kernels_are_not_split_and_leave_blas_alone(threads, monkeypatch, rng):
    lt.set_num_threads(1)
    monkeypatch.setenv("LAZYTENSOR_HOST_BLAS", "numpy")  # where MKL is chosen, it takes every product whole
    before = _numpy_blas_threads()
    threads(2)
    monkeypatch.setattr(parallel, "MIN_PIECE", 1 << 24)
    seen = []
    pieces = parallel.pieces
    monkeypatch.setattr(parallel, "pieces", lambda n, work=1: seen.append((_numpy_blas_threads(), pieces(n, work))))
    a = lt.tensor(rng.standard_normal((256, 256)))
    with lt.profile() as p:
        ((a @ a).softmax(-1)).numpy()
    assert [k.backend for k in p.kernels] == ["numpy", "numba"]  # the product left to NumPy's BLAS
    assert seen and all(s == (before, None) for s in seen)


def test_another_thread_gets_one_piece_while_a_run_splits(threads):
    import threading
    with parallel.kernels_session((), worth=True):
        seen = []
        t = threading.Thread(target=lambda: seen.append(parallel.pieces(1 << 20)))
        t.start()
        t.join()
        assert seen == [None] and len(parallel.pieces(1 << 20)) == 3


def test_without_a_spinning_pool_kernels_run_on_one_thread(threads, monkeypatch):
    monkeypatch.setitem(parallel._state, "layer", "workqueue")
    assert lt.get_num_threads() == 1
    with parallel.kernels_session((), worth=True):
        assert not parallel.splitting() and parallel.pieces(1 << 20) is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_runs_its_kernels_on_one_thread(threads, rng):
    x = rng.standard_normal((256, 512)).astype(np.float32)
    lt.tensor(x).softmax(-1).numpy()  # numba's pool has run in the parent
    pid = os.fork()
    if pid == 0:  # the child: GNU OpenMP would abort it if its pool ran again
        ok = lt.get_num_threads() == 1 and np.allclose(lt.tensor(x).softmax(-1).numpy().sum(-1), 1, atol=1e-5)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_set_num_threads_rejects_what_is_not_a_positive_integer():
    for bad in (0, -2, 1.5, "2", True):
        with pytest.raises(ValueError, match="positive integer"):
            lt.set_num_threads(bad)


@pytest.mark.parametrize("setting,applied", [("", None), ("default", None), ("tuned", True)])
def test_the_engine_leaves_malloc_alone_unless_told_to_tune_it(setting, applied):
    import os
    import subprocess
    import sys
    if not sys.platform.startswith("linux"):
        pytest.skip("mallopt is glibc's")
    env = dict(os.environ, LAZYTENSOR_MALLOC=setting)
    out = subprocess.run([sys.executable, "-c", "import lazytensor.runtime.host_malloc as m, lazytensor; "
                          "imported = m._applied['value']; lazytensor.ones(3).sum().item(); "
                          "print(imported, m._applied['value'])"], capture_output=True, text=True, env=env,
                         check=True)
    assert out.stdout.split() == ["None", str(applied)]  # applied at the first computation, not at import


@pytest.mark.parametrize("setting,applied", [("", None), ("default", None), ("tuned", True)])
def test_the_training_command_leaves_malloc_alone_as_a_users_script_does(setting, applied):
    import os
    import subprocess
    import sys
    if not sys.platform.startswith("linux"):
        pytest.skip("mallopt is glibc's")
    env = dict(os.environ, LAZYTENSOR_MALLOC=setting)
    program = ("import lazytensor.runtime.host_malloc as m; from lazytensor_train import cli; "
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


def test_training_steps_with_kernels_in_pieces_track_the_one_thread_losses(threads, piece_counts):
    from lazytensor_train.data import CharDataset, default_corpus
    from lazytensor_train.train import TrainConfig, build, train_step
    data = CharDataset(default_corpus()[:20000])
    losses = {}
    for n in (1, 2):
        threads(n)
        lt.manual_seed(0)
        model, opt, _ = build(TrainConfig(config="tiny", steps=3), data)
        params = list(model.parameters())
        lt.manual_seed(1)
        piece_counts.clear()
        losses[n] = [train_step(model, opt, params, *data.batch("train", 4, 64), 1.0).item() for _ in range(3)]
        assert max(piece_counts) == n
    # products in pieces may round differently; everything else is computed as on one thread
    np.testing.assert_allclose(losses[2], losses[1], rtol=1e-5)


def test_a_step_captured_on_two_threads_replays_on_one(threads, rng):
    x = lt.tensor(rng.standard_normal((64, 128, 96)).astype(np.float32))
    w = lt.tensor(rng.standard_normal((96, 80)).astype(np.float32))
    step = lt.jit(lambda x, w: ((x @ w).softmax(-1) * 2.0).sum())
    want = ((x @ w).softmax(-1) * 2.0).sum().item()
    threads(2)
    got = [step(x, w).item() for _ in range(3)]  # warm-up, capture, replay
    threads(1)
    with lt.profile() as p:
        got += [step(x, w).item() for _ in range(2)]
    assert "numba" in {k.backend for k in p.kernels if k.op == "matmul"}  # the captured product, on one thread
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_lone_elementwise_op_runs_in_pieces_with_the_one_thread_bytes(threads, rng):
    x, y = (rng.standard_normal((256, 512)).astype(np.float32) for _ in range(2))
    threads(1)
    with lt.profile() as p:
        want = (lt.tensor(x) * lt.tensor(y)).numpy()
    assert [k.backend for k in p.kernels] == ["numpy"]  # one thread: NumPy's ufunc
    threads(2)
    with lt.profile() as p:
        got = (lt.tensor(x) * lt.tensor(y)).numpy()
    assert [(k.op, k.backend) for k in p.kernels] == [("fused(mul)", "numba")]  # a kernel that can be cut
    assert got.tobytes() == want.tobytes()


def test_products_in_pieces_call_numpys_openblas_even_with_scipys_loaded(threads):
    import ctypes
    lt.get_num_threads()  # starts numba's pool, which loads SciPy's OpenBLAS where SciPy is installed
    numpys = [i for i in threadpoolctl.threadpool_info()
              if i.get("internal_api") == "openblas" and "numpy" in i["filepath"]]
    if not numpys or blas.gemm_address(np.float32) is None:
        pytest.skip("NumPy's BLAS here is not an OpenBLAS exporting cblas_sgemm")
    lib = ctypes.CDLL(numpys[0]["filepath"])
    exported = [getattr(lib, name.format("s"), None) for name, _ in blas._NAMES]
    addresses = {ctypes.cast(fn, ctypes.c_void_p).value for fn in exported if fn is not None}
    assert blas.gemm_address(np.float32)[0] in addresses


def _q_k_v_projection(rng):
    """A linear layer's output read only through views (attention's q, k and v)."""
    x = lt.tensor(rng.standard_normal((8, 128, 64)).astype(np.float32))
    w = lt.tensor(rng.standard_normal((192, 64)).astype(np.float32))
    b = lt.tensor(rng.standard_normal(192).astype(np.float32))
    return x, w, b, F.linear(x, w, b)


def test_a_bias_add_read_by_views_runs_with_its_product_as_one_kernel(threads, monkeypatch, rng):
    monkeypatch.setenv("LAZYTENSOR_FUSE", "1")
    x, w, b, y = _q_k_v_projection(rng)
    q, k, v = y.split(64, dim=-1)
    with lt.profile() as p:
        lt.realize(q, k, v)
    assert [(r.op, r.backend) for r in p.kernels if r.op != "permute" and r.op != "slice"] == \
        [("fused(matmul+add)", "numba")]


def test_a_product_with_its_bias_gives_the_bytes_of_the_product_then_the_add(threads, monkeypatch, rng):
    """The bias is added to each block of rows right after its product: each element rounded as the add
    rounds it, so the bytes are those of the product's kernel followed by NumPy's add."""
    monkeypatch.setenv("LAZYTENSOR_FUSE", "1")
    x, w, b, y = _q_k_v_projection(rng)
    fused = y.numpy()
    monkeypatch.setenv("LAZYTENSOR_FUSE", "0")
    product = (x @ w.mT).numpy()
    assert fused.tobytes() == (product + b.numpy()).tobytes()
    np.testing.assert_allclose(fused, x.numpy() @ w.numpy().T + b.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dims", [(0, 2, 1, 3), (0, 3, 1, 2), (2, 0, 1, 3)], ids=str)
def test_a_stack_of_products_read_permuted_is_laid_out_as_read(threads, dims, rng):
    """Attention's heads merged back (or a head's gradient read transposed): the product's kernel writes
    its result in the permuted order, so the permuted view is dense and reshaping it copies nothing;
    the values are the product's."""
    a = rng.standard_normal((4, 3, 64, 32)).astype(np.float32)
    b = rng.standard_normal((4, 3, 32, 48)).astype(np.float32)
    product = lt.tensor(a) @ lt.tensor(b)
    permuted = product.permute(*dims)
    merged = permuted.reshape(permuted.shape[0], permuted.shape[1], -1)
    values = merged.numpy()
    np.testing.assert_allclose(values, np.matmul(a, b).transpose(dims).reshape(values.shape), rtol=1e-5, atol=1e-5)
    assert product.numpy().transpose(dims).flags.c_contiguous
    plain = (lt.tensor(a) @ lt.tensor(b)).numpy()  # the same kernel writing C order: the same bytes
    assert plain.transpose(dims).tobytes() == product.numpy().transpose(dims).tobytes()


@pytest.mark.parametrize("launcher, cores, expected", [
    ({}, 4, 4),  # a plain run: every core this process may use
    ({"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "2"}, 4, 2),  # 2 ranks here
    ({"PMI_RANK": "0", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "4"}, 2, 1),  # more ranks
])
def test_ranks_mpiexec_starts_on_one_machine_share_its_cores_by_default(monkeypatch, launcher, cores, expected):
    for name in ("LAZYTENSOR_NUM_THREADS", "OMP_NUM_THREADS", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
                 "MPI_LOCALNRANKS", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in launcher.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert parallel._default_threads() == expected
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # a count the user gave is kept
    assert parallel._default_threads() == 3


def test_a_product_in_one_piece_gives_the_bytes_of_the_same_product_through_the_pool():
    """A one-piece product runs on this thread (gemm_rows / gemm_batches), not through numba's pool: the
    same library call, so the same bytes."""
    rs = np.random.default_rng(0)
    library = blas.gemm_address(np.dtype(np.float32))
    if library is None:
        pytest.skip("no cblas library found through threadpoolctl")
    a, b = rs.standard_normal((37, 19), np.float32), rs.standard_normal((19, 23), np.float32)
    whole, pooled = np.empty((37, 23), np.float32), np.empty((37, 23), np.float32)
    one = np.array([0, 37], np.int64)
    blas.matmul_rows(a, b, whole, one, library)
    a2, ta, lda = blas.layout(a)
    b2, tb, ldb = blas.layout(b)
    blas.gemm_rows_in_pieces(library[0], blas._cell(library[1]), a2, ta, lda, b2, tb, ldb, pooled, one)
    assert whole.tobytes() == pooled.tobytes()
    x, w = rs.standard_normal((3, 5, 7), np.float32), rs.standard_normal((3, 7, 4), np.float32)
    batched = np.empty((3, 5, 4), np.float32)
    blas.matmul_batches(x, w, batched, np.array([0, 3], np.int64), library)
    np.testing.assert_allclose(batched, x @ w, rtol=1e-5)
