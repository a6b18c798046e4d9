"""A data-parallel training script written for PyTorch (torch.distributed, DistributedSampler, DDP with
no_sync, an all_reduce of the loss), with only its imports changed; run by tests/test_distributed.py under
`mpiexec -n 2`. Writes each rank's parameters and summed loss to <out>/rank<r>.json."""
import json
import sys

import lazytensor as torch
import lazytensor.distributed as dist
from lazytensor.nn.parallel import DistributedDataParallel as DDP
from lazytensor.utils.data import DataLoader, TensorDataset
from lazytensor.utils.data.distributed import DistributedSampler


def main(out):
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    sampler = DistributedSampler(data, shuffle=True, seed=3)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)),
                device_ids=None, find_unused_parameters=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, foreach=True)
    losses = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for i, (x, y) in enumerate(loader):
            if i % 2 == 0:
                opt.zero_grad()
                with model.no_sync():  # accumulate this batch's gradient locally
                    torch.nn.functional.mse_loss(model(x), y).backward()
                continue
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()  # averaged over the ranks (with the accumulated one)
            opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        losses.append(total.item() / world)
    dist.barrier()
    # nanoGPT's form of no_sync: the flag PyTorch's DDP reads; a backward with it off leaves each rank's own
    # gradient, one with it on averages them
    x = data[rank * 8:(rank + 1) * 8][0]
    grads = {}
    for sync in (False, True):
        opt.zero_grad()
        model.require_backward_grad_sync = sync
        model(x).sum().backward()
        grads[sync] = model.module[0].weight.grad.numpy().tobytes().hex()
    with open(f"{out}/rank{rank}.json", "w") as f:
        json.dump({"world": world, "losses": losses, "grads": grads,
                   "params": {k: v.numpy().tobytes().hex() for k, v in model.state_dict().items()}}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
