"""What refuses a capture, in one list: why `lt.jit` (lazytensor/compiled.py), eager repeats
(runtime/replay/repeats.py) or backward replay (lazytensor/backward_replay.py) runs a call, a
realization or a backward pass the eager way instead of recording it or replaying a recording.

Every place that refuses names its entry here and counts it (`refuse`): `lt.counters()
["replay_refusals"]` says how often each replay refused for each reason ("repeats: small"), so a
program can see why its steps are not replayed; `lt.jit` also says the entry's text in its JitWarning.
"""
from typing import NamedTuple

from ..counters import COUNTERS

JIT, REPEATS, BACKWARD = "jit", "repeats", "backward"


class Refusal(NamedTuple):
    """One reason: `name` (the counter's), `text` (what a user reads; "{}" takes the detail), `replays`
    (those it stops)."""

    name: str
    text: str
    replays: tuple

    def says(self, detail=None):
        return self.text.format(detail) if detail is not None else self.text


# A host access: the value read may steer Python, a value written is new, a move is the user's.
HOST_READ = Refusal("host_read", "a host read ({})", (JIT, REPEATS, BACKWARD))
HOST_WRITE = Refusal("host_write", "a host write ({})", (JIT, REPEATS, BACKWARD))
PLACEMENT = Refusal("placement", "a placement ({})", (JIT, REPEATS))
RESEEDED = Refusal("reseeded", "the random generator was reseeded inside the compiled function", (JIT, REPEATS))
KEPT_TENSORS = Refusal("kept_tensors", "it keeps {}, which a replay would not update", (JIT,))
# Recordings worth less than they cost, or that cannot be compared:
OFF = Refusal("off", "LAZYTENSOR_REPLAY=0", (REPEATS, BACKWARD))
SMALL = Refusal("small", "fewer nodes than a signature is worth", (REPEATS, BACKWARD))
UNCOMPARABLE = Refusal("uncomparable", "an attribute that cannot be compared (an array)", (REPEATS, BACKWARD))
# What a recording could not remake:
HOST_VALUES = Refusal("host_values", "values made on the host while it ran (constants, 0-d values read "
                      "back) or a step the host runner cannot run", (REPEATS, BACKWARD))
OUTSIDE = Refusal("outside", "a kernel or node from outside the recorded graph", (REPEATS, BACKWARD))
RANDOM = Refusal("random", "a gradient rule that draws random numbers", (BACKWARD,))
EFFECTS = Refusal("effects", "a gradient rule that realizes, reads or writes a value, or sets a .grad it "
                  "does not make", (BACKWARD,))
RELEASED = Refusal("released", "a record whose saved values were released", (BACKWARD,))
EXPLICIT = Refusal("explicit", "create_graph or an explicit gradient", (BACKWARD,))

ALL = (HOST_READ, HOST_WRITE, PLACEMENT, RESEEDED, KEPT_TENSORS, OFF, SMALL, UNCOMPARABLE, HOST_VALUES, OUTSIDE,
       RANDOM, EFFECTS, RELEASED, EXPLICIT)


def refuse(replay, refusal):
    """Count that `replay` (JIT, REPEATS or BACKWARD) refused for `refusal`."""
    COUNTERS.replay_refusals[replay, refusal.name] += 1
