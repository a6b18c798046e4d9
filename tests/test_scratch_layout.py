"""Where a device runner's internal values live (runtime/replay/scratch_layout.py): chunks of scratch whose values
never share bytes while both are alive, cut to keep the replay within the eager call's peak and merged
back where that peak allows."""
from hypothesis import given, settings, strategies as st

from lazytensor.runtime.replay import scratch_layout
from lazytensor.runtime.memory import bucket


@st.composite
def programs(draw):
    """Internal values {slot: (aligned size, first, last)} and other results (bytes, made, freed) over a
    program of `n` steps."""
    n = draw(st.integers(4, 40))
    def interval():
        first = draw(st.integers(0, n - 1))
        return first, draw(st.integers(first, n - 1))
    internal = {s: (scratch_layout.aligned(draw(st.integers(1, 5000))),) + interval()
                for s in range(draw(st.integers(1, 30)))}
    externals = [(bucket(draw(st.integers(1, 5000))),) + interval() for _ in range(draw(st.integers(0, 10)))]
    return internal, externals, n


def _peak(chunks, externals, n):
    return scratch_layout.peak_of([(bucket(c.size), c.first, c.last) for c in chunks] + externals, n)[0]


def _one_each(internal, externals, n):
    return scratch_layout.peak_of([(bucket(v[0]), v[1], v[2]) for v in internal.values()] + externals, n)[0]


@settings(max_examples=200, deadline=None)
@given(programs(), st.integers(0, 100000))
def test_chunks_hold_every_value_apart_from_those_alive_with_it_and_keep_within_the_budget(program, eager):
    internal, externals, n = program
    one_each = _one_each(internal, externals, n)
    chunks = scratch_layout.layout(internal, externals, n, eager_peak=eager + one_each, replay_peak=one_each)
    assert sorted(s for c in chunks for s in c.offsets) == sorted(internal)
    for c in chunks:
        for s, at in c.offsets.items():
            size, first, last = internal[s]
            assert at % scratch_layout.ALIGN == 0 and at + size <= c.size and c.first <= first and last <= c.last
            for t, other in c.offsets.items():
                o_size, o_first, o_last = internal[t]
                if t != s and first <= o_last and o_first <= last:  # alive together: apart in bytes
                    assert at + size <= other or other + o_size <= at
    assert _peak(chunks, externals, n) <= max(one_each, eager + one_each)


def test_values_far_from_the_peak_share_chunks_again_after_the_cuts():
    """Big results early and late in a long program: one chunk held throughout would raise the peak
    there, so the layout is cut (into 32 chunks, most of them one short-lived value each); merged back
    wherever the peak is not raised, it is 4, with the same peak as a block per value."""
    internal = {s: (scratch_layout.ALIGN * 4, s, s + 1) for s in range(60)}  # a chain of short-lived values
    internal[100] = (scratch_layout.ALIGN * 64, 29, 31)  # one big value in the middle
    externals = [(bucket(20000), 0, 10), (bucket(20000), 45, 55)]
    one_each = _one_each(internal, externals, 62)
    chunks = scratch_layout.layout(internal, externals, 62, eager_peak=one_each, replay_peak=one_each)
    assert _peak(chunks, externals, 62) == one_each
    assert len(chunks) == 4
