"""lazytensor.utils.data in PyTorch's shape: DataLoader's batching (batch_size, shuffle, drop_last,
collate_fn, sampler, batch_sampler, IterableDataset), its collation of tensors, arrays, numbers and
containers, seeded orders, random_split and the samplers."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset, RandomSampler,
                                   SequentialSampler, Subset, SubsetRandomSampler, TensorDataset, get_worker_info,
                                   random_split)


class Squares(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return {"x": np.full(2, i, np.float32), "y": i * i, "name": f"n{i}"}


def test_batches_of_a_map_dataset_in_order_with_the_last_one_shorter():
    batches = list(DataLoader(Squares(), batch_size=4))
    assert [b["y"].tolist() for b in batches] == [[0, 1, 4, 9], [16, 25, 36, 49], [64, 81]]
    assert batches[0]["x"].shape == (4, 2) and batches[0]["name"] == ["n0", "n1", "n2", "n3"]
    assert len(DataLoader(Squares(), batch_size=4)) == 3


def test_drop_last_drops_the_short_batch():
    loader = DataLoader(Squares(), batch_size=4, drop_last=True)
    assert len(loader) == 2 and len(list(loader)) == 2


def test_shuffle_with_a_seeded_generator_gives_a_reproducible_permutation_each_epoch():
    def epochs(seed):
        loader = DataLoader(Squares(), batch_size=3, shuffle=True, generator=lt.Generator().manual_seed(seed))
        return [[int(v) for b in loader for v in b["y"].tolist()] for _ in range(2)]
    first, again = epochs(7), epochs(7)
    assert first == again and first[0] != first[1]
    assert sorted(first[0]) == [i * i for i in range(10)]


def test_shuffle_follows_manual_seed():
    lt.manual_seed(3)
    a = [b.tolist() for b in DataLoader(list(range(8)), batch_size=8, shuffle=True)]
    lt.manual_seed(3)
    assert a == [b.tolist() for b in DataLoader(list(range(8)), batch_size=8, shuffle=True)]


def test_tensor_dataset_batches_match_slices():
    x, y = lt.arange(12).reshape(6, 2).float(), lt.arange(6)
    (bx, by), = list(DataLoader(TensorDataset(x, y), batch_size=6))
    assert lt.equal(bx, x) and lt.equal(by, y)


def test_collate_fn_and_batch_size_none():
    loader = DataLoader(Squares(), batch_size=5, collate_fn=lambda items: sum(i["y"] for i in items))
    assert list(loader) == [30, 255]
    unbatched = next(iter(DataLoader(Squares(), batch_size=None)))
    assert isinstance(unbatched["x"], lt.Tensor) and unbatched["y"] == 0


def test_sampler_and_batch_sampler():
    picked = list(DataLoader(list(range(10)), sampler=[9, 0, 3], batch_size=2))
    assert [b.tolist() for b in picked] == [[9, 0], [3]]
    sampler = BatchSampler(SequentialSampler(range(5)), 2, drop_last=False)
    assert list(sampler) == [[0, 1], [2, 3], [4]]
    assert [b.tolist() for b in DataLoader(list(range(5)), batch_sampler=sampler)] == [[0, 1], [2, 3], [4]]


def test_random_sampler_with_replacement_draws_num_samples_indices():
    g = lt.Generator().manual_seed(0)
    drawn = list(RandomSampler(range(4), replacement=True, num_samples=50, generator=g))
    assert len(drawn) == 50 and set(drawn) <= {0, 1, 2, 3} and len(set(drawn)) == 4
    endless = iter(RandomSampler(range(4), replacement=True, num_samples=int(1e10)))
    assert all(0 <= next(endless) < 4 for _ in range(100))
    assert sorted(SubsetRandomSampler([5, 7, 9])) == [5, 7, 9]


def test_iterable_dataset_is_batched_in_its_own_order():
    class Count(IterableDataset):
        def __iter__(self):
            return iter(range(7))
    assert [b.tolist() for b in DataLoader(Count(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    with pytest.raises(ValueError, match="IterableDataset"):
        DataLoader(Count(), shuffle=True)


def test_random_split_by_lengths_and_fractions():
    a, b = random_split(range(10), [7, 3], generator=lt.Generator().manual_seed(0))
    assert len(a) == 7 and len(b) == 3 and sorted(list(a) + list(b)) == list(range(10))
    parts = random_split(range(11), [0.5, 0.5])
    assert [len(p) for p in parts] == [6, 5]
    with pytest.raises(ValueError, match="sum to 9"):
        random_split(range(10), [5, 4])


def test_subset_and_concat():
    data = ConcatDataset([list(range(3)), list(range(10, 12))])
    assert len(data) == 5 and data[3] == 10 and data[-1] == 11
    assert list(Subset(data, [4, 0])) == [11, 0]


def test_arguments_users_pass_for_worker_processes_are_accepted():
    loader = DataLoader(Squares(), batch_size=2, num_workers=4, pin_memory=True, persistent_workers=True)
    assert len(list(loader)) == 5 and get_worker_info() is None


def test_conflicting_arguments_are_refused():
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(Squares(), sampler=[0], shuffle=True)
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        DataLoader(Squares(), batch_size=0)


def test_tensor_dataset_batches_are_one_selection_per_tensor_and_equal_the_stacked_samples():
    x, y = lt.arange(20).reshape(10, 2).float(), lt.arange(10) * 3
    order = [7, 2, 9, 0]
    lt.reset_counters()
    (bx, by), = list(DataLoader(TensorDataset(x, y), batch_size=4, sampler=order))
    assert lt.counters()["host_reads"] == 0  # no element read per sample
    assert bx.tolist() == [x[i].tolist() for i in order] and by.tolist() == [int(y[i]) for i in order]


def test_a_loader_over_a_random_split_of_tensors_gathers_each_batch_at_once_with_the_samples_values():
    x = lt.tensor(np.arange(1000 * 3, dtype=np.float32).reshape(1000, 3))
    y = lt.tensor(np.arange(1000))
    train, _ = random_split(TensorDataset(x, y), [0.8, 0.2], generator=lt.Generator().manual_seed(0))
    inner = Subset(train, list(range(10, 600)))  # a Subset of a Subset too
    for data in (train, inner):
        xb, yb = next(iter(DataLoader(data, batch_size=128, shuffle=True, generator=lt.Generator().manual_seed(1))))
        assert lt.graph(xb).number_of_nodes() <= 3  # the tensor, the rows, one index_select
        order = list(RandomSampler(data, generator=lt.Generator().manual_seed(1)))[:128]
        assert xb.tolist() == [data[i][0].tolist() for i in order]
        assert yb.tolist() == [int(data[i][1]) for i in order]


def test_a_subset_fetches_a_batch_through_its_datasets_getitems():
    class Batched(Dataset):
        def __init__(self):
            self.calls = []

        def __len__(self):
            return 10

        def __getitem__(self, i):
            raise AssertionError("fetched one at a time")

        def __getitems__(self, indices):
            self.calls.append(list(indices))
            return [float(i) for i in indices]
    base = Batched()
    batch = next(iter(DataLoader(Subset(base, [9, 8, 7, 6]), batch_size=3)))
    assert batch.tolist() == [9.0, 8.0, 7.0] and base.calls == [[9, 8, 7]]


def test_shuffling_an_empty_dataset_is_refused_when_the_loader_is_made():
    with pytest.raises(ValueError, match="the dataset is empty"):
        DataLoader(TensorDataset(lt.zeros(0, 2)), batch_size=4, shuffle=True)
