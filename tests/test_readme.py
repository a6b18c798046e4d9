"""The README's Python examples run as written (so the first thing a user copies keeps working)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_the_readme_has_python_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAZYTENSOR_")}
    out = subprocess.run([sys.executable, "-c", BLOCKS[index]], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()


def test_ci_runs_the_readmes_two_set_up_commands_in_order_in_one_venv():
    commands = [line for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S)
                for line in block.splitlines() if line.startswith("python -m pip install") and "&&" in line]
    assert len(commands) == 2, commands  # install-and-train, then install-tests-and-run-them
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text().splitlines()
    positions = [ci.index(c) for c in commands]
    assert positions == sorted(positions)
    assert sum(line.startswith("python3 -m venv") for line in ci) == 1
