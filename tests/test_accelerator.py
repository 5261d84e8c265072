"""The one-shot accelerator check (benchmarks/accelerator.sh) runs on a CPU at its tiny sizes: every section
prints its comparison with a finite positive ratio, and the script exits cleanly."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.xdist_group("accelerator")
def test_accelerator_check_runs_on_a_cpu(tmp_path):
    # XLA_FLAGS as the suite sets them (tests/conftest.py): the script compiles every program of its five sections
    env = dict(os.environ, PYTHON=sys.executable, JAX_PLATFORMS="cpu", HOME=str(tmp_path), MPLBACKEND="Agg")
    out = subprocess.run([str(ROOT / "benchmarks" / "accelerator.sh"), "--tiny"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    for section in ("1. likelihood", "2. reduced PT1 sweep", "3. NUTS", "4. SGLD LLC", "5. tempered SMC", "total"):
        assert section in text, text
    assert "no accelerator: both columns are this CPU" in text
    ratios = [float(r) for r in re.findall(r"ratio\s+([-0-9.naninf]+)", text)]
    assert len(ratios) == 5, text           # two likelihood rows, the sweep, SGLD, SMC (NUTS on one device: no row)
    assert all(0 < r < float("inf") for r in ratios), text
    assert re.search(r"2 chains on the accelerator: async [0-9,]+ grads/s, lockstep [0-9,]+ grads/s", text), text
