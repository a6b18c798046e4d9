"""The seeded generator's state: a 64-bit seed and the next stream number.

Each draw takes a fresh stream, so a draw's values depend only on (seed, stream, element index) and
any backend computes them in any order (kernels/reference/random.py defines the bits).
"""
import os


class Generator:
    """Hands out (seed, stream) pairs: manual_seed(s) restarts the sequence of streams."""

    def __init__(self, seed=None):
        self.manual_seed(int.from_bytes(os.urandom(8), "little") if seed is None else seed)

    def manual_seed(self, seed):
        seed = int(seed)
        if not 0 <= seed < 2 ** 64:
            raise ValueError(f"manual_seed: the seed must be in [0, 2**64), got {seed}")
        self.seed = seed
        self.next_stream = 0
        return self

    def take_stream(self):
        stream = self.next_stream
        self.next_stream += 1
        return self.seed, stream

    def get_state(self):
        return {"seed": self.seed, "next_stream": self.next_stream}

    def set_state(self, state):
        self.seed, self.next_stream = int(state["seed"]), int(state["next_stream"])


DEFAULT = Generator()
