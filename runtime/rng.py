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
        """Continue from `state`, what get_state returned; ValueError for anything else."""
        if not (isinstance(state, dict) and set(state) == {"seed", "next_stream"} and all(
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2 ** 64 for v in state.values())):
            raise ValueError(f"set_rng_state: expected {{'seed': int, 'next_stream': int}} (each in [0, 2**64)), "
                             f"got {str(state)[:60]}")
        self.seed, self.next_stream = state["seed"], state["next_stream"]


DEFAULT = Generator()
