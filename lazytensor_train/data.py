"""Text data for the char-level GPT: the default corpus, a char vocabulary, a split, seeded batches."""
import numpy as np

from lazytensor import host_copy, int64, randint, tensor


def default_corpus():
    """CPython's pydoc topics (several hundred KB of English documentation), shipped with every Python."""
    from pydoc_data import topics
    return "\n\n".join(topics.topics[k] for k in sorted(topics.topics))


class CharDataset:
    """Characters -> int ids, a deterministic train/val split (the first 90% trains), and batches."""

    def __init__(self, text, val_fraction=0.1):
        if len(text) < 10:
            raise ValueError(f"CharDataset: the text is too short to train on ({len(text)} characters)")
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        data = np.array([self.stoi[c] for c in text], dtype=np.int64)
        n = int(len(data) * (1 - val_fraction))
        self.train, self.val = data[:n], data[n:]

    @property
    def vocab_size(self):
        return len(self.chars)

    def encode(self, s):
        unknown = sorted(set(s) - set(self.stoi))
        if unknown:
            raise ValueError(f"encode: characters not in the vocabulary: {unknown!r}")
        return [self.stoi[c] for c in s]

    def decode(self, ids):
        return "".join(self.chars[int(i)] for i in ids)

    def batch(self, split, batch_size, block_size):
        """(x, y) int64 tensors of shape (batch, block); offsets drawn from the seeded generator."""
        data = self.train if split == "train" else self.val
        if len(data) <= block_size + 1:
            raise ValueError(f"batch: the {split} split has {len(data)} tokens, fewer than block_size + 2")
        # Offsets are drawn from the seeded generator and read on the host (a read named "data").
        starts = host_copy(randint(0, len(data) - block_size - 1, (batch_size,)), "data")
        idx = starts[:, None] + np.arange(block_size)[None, :]
        return tensor(data[idx], dtype=int64), tensor(data[idx + 1], dtype=int64)

    def unigram_loss(self, split="val"):
        """Cross-entropy (nats/char) of predicting every character by its training-set frequency."""
        counts = np.bincount(self.train, minlength=self.vocab_size).astype(np.float64) + 1.0
        logp = np.log(counts / counts.sum())
        data = self.val if split == "val" else self.train
        return float(-logp[data].mean())
