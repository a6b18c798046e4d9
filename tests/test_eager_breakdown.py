"""bench/eager_breakdown.py accounts for a whole eager step: every kernel's launch is timed and the parts
add up to the step (the instrument behind the eager-step figures in bench/RESULTS.md)."""
import json
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "eager_breakdown.py")


def _rows(model):
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", LAZYTENSOR_NUM_THREADS="1")
    # from the fourth step on an eager step's realization is replayed (runtime/replay/repeats.py): time those too
    out = subprocess.run([sys.executable, SCRIPT, "--worker", "--model", model, "--steps", "3", "--warmup", "2"],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_kernel_of_an_eager_step_is_a_timed_launch_and_the_parts_add_up_to_the_step():
    for model in ("user", "cli"):
        rows = _rows(model)
        assert len(rows["step"]) == 3
        assert rows["launch_calls"] == rows["kernels"] and min(rows["kernels"]) > 100
        assert rows["replayed"][-1] >= 1  # the step's realization (and its small reads) from their recordings
        for i, step in enumerate(rows["step"]):
            parts = [rows[name][i] for name in ("launches", "realize_own", "outside")]
            phases = [rows[name][i] for name in ("forward", "backward", "clip", "opt_step", "item")]
            assert min(parts) > 0 and min(phases) > 0
            assert abs(sum(parts) - step) < 1e-9 and abs(sum(phases) - step) < 1e-9
