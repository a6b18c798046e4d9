"""Process-wide counters of realizations, kernels, host reads and host writes (for tests and users)."""
import collections


class Counters:
    """Counts what the engine did; `snapshot()` returns a plain dict, `reset()` zeroes everything."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.realizations = 0
        self.kernels = 0
        # of those, run by a compiled replay from prebuilt launches or calls (device_runner, host_runner)
        self.prepared_kernels = 0
        self.updated_in_place = 0  # state values a compiled replay wrote over their old device blocks
        # of the realizations, those run from a repeated one's recording (runtime/replay/repeats.py)
        self.replayed_realizations = 0
        self.replayed_backwards = 0  # backward passes rebuilt from a recording (lazytensor/backward_replay.py)
        self.remade = 0  # values a device realization made again for late readers, not held (runtime/remat.py)
        self.host_reads = collections.Counter()
        self.host_writes = collections.Counter()
        # (replay, reason) -> times lt.jit, eager repeats or backward replay refused (runtime/replay/refusals.py)
        self.replay_refusals = collections.Counter()

    def snapshot(self):
        return {
            "realizations": self.realizations,
            "kernels": self.kernels,
            "prepared_kernels": self.prepared_kernels,
            "updated_in_place": self.updated_in_place,
            "replayed_realizations": self.replayed_realizations,
            "replayed_backwards": self.replayed_backwards,
            "remade": self.remade,
            "host_reads": sum(self.host_reads.values()),
            "host_reads_by_trigger": dict(self.host_reads),
            "host_writes": sum(self.host_writes.values()),
            "host_writes_by_trigger": dict(self.host_writes),
            "replay_refusals": {f"{replay}: {name}": n for (replay, name), n in self.replay_refusals.items()},
        }


COUNTERS = Counters()
