"""Programs tests/test_distributed.py runs under `mpiexec -n N python tests/mpi_worker.py SCENARIO OUT`.
Each rank writes what it saw to OUT/rank{r}.json or .npz; the test compares them."""
import json
import os
import sys

import numpy as np

import lazytensor as lt
import lazytensor.distributed as dist
from lazytensor import nn, optim
from lazytensor_train import checkpoint


def collectives(out):
    rank, size = dist.rank(), dist.world_size()
    report = {"rank": rank, "size": size, "checks": {}}
    for device in ("cpu", "virtual"):
        lt.set_device(device)
        lt.clear_transfer_log()
        for name in ("float32", "float64", "int32", "int64", "bool"):
            dtype = getattr(lt, name if name != "bool" else "bool")
            base = np.arange(6).reshape(2, 3)
            mine = (base + 10 * rank).astype(np.dtype(name)) if name != "bool" else (base % (rank + 2) == 0)
            every = [((base + 10 * r).astype(np.dtype(name)) if name != "bool" else (base % (r + 2) == 0))
                     for r in range(size)]

            def fresh():
                t = lt.tensor(mine, dtype=dtype)
                return t.to(device) if device != "cpu" else t
            ops = {"sum": np.sum, "max": np.max, "min": np.min} if name != "bool" else {"max": np.max, "min": np.min}
            for op, fn in ops.items():
                got = dist.all_reduce(fresh(), op).numpy()
                want = fn(np.stack(every).astype(np.int64 if name != "bool" else bool), axis=0).astype(np.dtype(name))
                report["checks"][f"{device} all_reduce {op} {name}"] = bool(got.dtype == want.dtype and
                                                                            np.array_equal(got, want))
            if name.startswith("float"):
                got = dist.all_reduce(fresh(), "mean").numpy()
                want = (np.stack(every).astype(np.float64).sum(0) / size).astype(np.dtype(name))
                report["checks"][f"{device} all_reduce mean {name}"] = bool(np.array_equal(got, want))
            got = dist.broadcast(fresh(), src=size - 1).numpy()
            report["checks"][f"{device} broadcast {name}"] = bool(np.array_equal(got, every[-1]))
            slots = [lt.zeros(2, 3, dtype=dtype) for _ in range(size)]
            dist.all_gather(slots, fresh())
            report["checks"][f"{device} all_gather {name}"] = all(np.array_equal(s.numpy(), e)
                                                                  for s, e in zip(slots, every))
        if device != "cpu":  # a value only the device holds: downloaded for the collective, result put back
            y = lt.tensor(np.ones(5, np.float32)).to(device) * 2
            lt.realize(y)
            report["device-only before"] = y.residency.value
            dist.all_reduce(y)
            report["after"] = y.residency.value
            report["checks"][f"{device} all_reduce of a device-only value"] = bool(
                np.array_equal(y.numpy(), np.full(5, 2.0 * size, np.float32)))
        empty = dist.all_reduce(lt.zeros(0, 3), "sum")
        report["checks"][f"{device} all_reduce of an empty tensor"] = empty.numpy().shape == (0, 3)
        reasons = sorted({(r.direction, r.reason) for r in lt.transfer_log() if "collective" in r.reason})
        report[f"{device} reasons"] = reasons
    lt.set_device("cpu")
    x = lt.tensor(np.ones(4, np.float32))
    with lt.profile() as p:
        dist.all_reduce(x)
    report["profile mpi kernels"] = p.stats["kernels_by_backend"].get("mpi", 0)
    _write(out, report)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 32)
        self.b = nn.Linear(32, 4)

    def forward(self, x):
        return self.b(nn.functional.gelu(self.a(x)))


def train(out, per_rank_batch, steps=20):
    """An MLP trained with DistributedDataParallel: every rank draws the same global batch of
    per_rank_batch * size samples and takes its slice, so N ranks see what 1 process x N*B sees."""
    rank, size = dist.rank(), dist.world_size()
    lt.manual_seed(1234 + rank)  # different initial weights per rank: DDP must broadcast rank 0's
    model = dist.DistributedDataParallel(MLP(), bucket_cap_mb=0.002)  # several buckets
    if rank == 0:  # the weights 1 process starts from: the same seed as rank 0
        pass
    opt = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    data = np.random.default_rng(7)
    losses = []
    for _ in range(steps):
        xs = data.standard_normal((per_rank_batch * size, 8)).astype(np.float32)
        ys = np.sin(xs[:, :4] * 2.0).astype(np.float32)
        lo, hi = rank * per_rank_batch, (rank + 1) * per_rank_batch
        x, y = lt.tensor(xs[lo:hi]), lt.tensor(ys[lo:hi])
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.item()))
    arrays = {f"p{i}": p.numpy() for i, p in enumerate(model.parameters())}
    np.savez(os.path.join(out, f"rank{rank}.npz"), losses=np.array(losses), **arrays)


def train_compiled(out, per_rank_batch=8, steps=12):
    """The same data-parallel training eagerly and as an lt.jit step (whose replays run the gradient
    collectives as steps of the compiled program): the bytes must agree."""
    rank, size = dist.rank(), dist.world_size()
    data = np.random.default_rng(3)
    batches = []
    for _ in range(steps):
        xs = data.standard_normal((per_rank_batch * size, 8)).astype(np.float32)
        lo, hi = rank * per_rank_batch, (rank + 1) * per_rank_batch
        batches.append((xs[lo:hi], np.sin(xs[lo:hi, :4] * 2.0).astype(np.float32)))
    results = {}
    for mode in ("eager", "compiled"):
        lt.manual_seed(99)
        model = dist.DistributedDataParallel(MLP())
        opt = optim.AdamW(model.parameters(), lr=1e-2)

        def step(x, y):
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return loss
        fn = lt.jit(step) if mode == "compiled" else step
        losses = [float(fn(lt.tensor(x), lt.tensor(y)).item()) for x, y in batches]
        model.remove()
        results[mode] = (losses, [p.numpy().copy() for p in model.parameters()])
        if mode == "compiled":
            results["replayed"] = fn.stats()["replayed"]
    same = results["eager"][0] == results["compiled"][0] and all(
        a.tobytes() == b.tobytes() for a, b in zip(results["eager"][1], results["compiled"][1]))
    _write(out, {"rank": rank, "same": same, "replayed": results["replayed"], "counters": lt.counters(),
                 "params": [p.tolist() for p in results["compiled"][1][:1]]})


def _ddp_run(steps, start=0, resume=None, save_at=None, fail_at=None, path=None):
    """DDP training of the MLP from seed 5 for steps [start, steps); a checkpoint (lazytensor/checkpoint)
    written after step `save_at` by rank 0, resumed from `resume`, rank 1 raising at `fail_at`."""
    rank, size = dist.rank(), dist.world_size()
    lt.manual_seed(5)
    model = dist.DistributedDataParallel(MLP())
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    if resume is not None:
        checkpoint.load(resume, model.module, opt)
    for step in range(start, steps):
        data = np.random.default_rng(1000 + step)  # the batch of a step depends on the step alone
        xs = data.standard_normal((8 * size, 8)).astype(np.float32)[rank * 8:(rank + 1) * 8]
        if rank == 1 and step == fail_at:
            raise RuntimeError("rank 1 fails after the checkpoint")
        loss = nn.functional.mse_loss(model(lt.tensor(xs)), lt.tensor(np.sin(xs[:, :4])))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step + 1 == save_at and rank == 0:
            checkpoint.save(path, model.module, opt, meta={"step": step + 1})
        dist.barrier()
    return [p.numpy() for p in model.parameters()]


def fault_then_resume(out, phase):
    path = os.path.join(out, "ck.npz")
    if phase == "fail":
        _ddp_run(10, save_at=5, fail_at=7, path=path)
    else:
        params = _ddp_run(10, start=5, resume=path) if phase == "resume" else _ddp_run(10)
        np.savez(os.path.join(out, f"{phase}{dist.rank()}.npz"), *params)


def fault(out, how):
    """Rank 1 raises (or dies without a word) at step 3 while rank 0 goes on into the next collective."""
    rank = dist.rank()
    x = lt.tensor(np.ones(3, np.float32))
    for step in range(10):
        if rank == 1 and step == 3:
            if how == "dies":
                os._exit(3)
            raise RuntimeError("rank 1 fails on purpose")
        dist.all_reduce(x)


def _write(out, report):
    with open(os.path.join(out, f"rank{report['rank']}.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    scenario, out = sys.argv[1], sys.argv[2]
    dist.init()
    if scenario == "collectives":
        collectives(out)
    elif scenario == "train":
        train(out, int(sys.argv[3]))
    elif scenario == "train_compiled":
        train_compiled(out)
    elif scenario == "fault_then_resume":
        fault_then_resume(out, sys.argv[3])
    elif scenario == "fault":
        fault(out, sys.argv[3])
