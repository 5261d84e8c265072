"""A config over several processes (slt_relu.distributed): the same metrics from 1 and 2 processes, a killed
process stops the run at once with nothing written, the sweep's programs shared out as a single process
forms them."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slt_relu.workflow.sweep import Point, run_points

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "experiments" / "dslt4_pt1_node_degeneracy.toml"
TINY = {"posterior.n": 200, "posterior.datasets": 2, "sampler.num_warmup": 60, "sampler.num_samples": 40,
        "phases.classify_every": 4, "sweep.truth.t": [1.0, 1.5707963267948966], "posterior.points_per_program": 1}
VOLATILE = {"program_wall_s", "resumed_points", "resumed_wall_s", "programs", "program_ticks", "program_chains",
            "program_points"}


def cli(args, cache=None, **kw):
    """The command line of a run of CONFIG with the settings KW, and its environment; JAX's persistent compilation
    cache off, or in the folder CACHE."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    return [sys.executable, "-m", "slt_relu.workflow.cli", "run", str(CONFIG), "--no-progress",
            *(["--no-cache"] if cache is None else ["--cache-dir", str(cache)]), *args,
            *sum((["--set", f"{k}={json.dumps(v)}"] for k, v in kw.items()), [])], env


def without_volatile(value):
    if isinstance(value, dict):
        return {k: without_volatile(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [without_volatile(v) for v in value]
    return value


def test_one_and_two_processes_give_the_same_metrics(tmp_path):
    """Each point's keys depend on the point, its program on the sweep: 2 coordinated processes on 127.0.0.1 run
    program k on process k mod 2, process 0 gathers the checkpoints and writes; the metrics are bitwise those
    of one process (the per-device batches are equal).  The single process (a fresh one, as the two) writes its
    compiled programs to a persistent compilation cache of this test's (``--cache-dir``), and the two processes load
    every one of them from it instead of compiling them again each: they add no entry (a program compiled otherwise
    for two processes would have another cache key, and be compiled anew)."""
    cache = tmp_path / "cache"
    cached = lambda: {p.relative_to(cache) for p in cache.rglob("*") if p.is_file()}
    cmd, env = cli(["--out", str(tmp_path / "one")], cache=cache, **TINY)
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    one = tmp_path / "one"
    first = cached()
    assert len(first) >= 3, first                           # every program of the run, no minimum compile time
    cmd, env = cli(["--out", str(tmp_path / "two"), "--processes", "2", "--oversubscribe"], cache=cache, **TINY)
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert cached() == first                                # the two processes found every program they ran
    assert "results written to" in res.stdout and "truth.t = 1.571:" in res.stdout
    a = json.loads((one / "metrics.json").read_text())
    b = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert without_volatile(a) == without_volatile(b)
    manifest = json.loads((tmp_path / "two" / "manifest.json").read_text())
    assert manifest["processes"] == 2 and len(manifest["jax_devices"]) == 2
    assert not list(tmp_path.glob(".two*"))                     # checkpoints and partial folders gone


def test_a_killed_process_stops_the_run_at_once_and_nothing_is_written(tmp_path):
    """kill -9 of process 1 mid-run: the launcher stops process 0 and says so in one line; no results folder."""
    out = tmp_path / "killed"
    cmd, env = cli(["--out", str(out), "--processes", "2", "--oversubscribe", "--heartbeat-timeout", "10"],
                   **{**TINY, "sampler.num_samples": 4000, "posterior.n": 2000})
    launcher = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim = None
    deadline = time.time() + 120
    while victim is None and time.time() < deadline and launcher.poll() is None:
        for proc in Path("/proc").iterdir():
            try:
                args = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if str(out).encode() in args and b"--process-id" in args and args[args.index(b"--process-id") + 1] == b"1":
                victim = int(proc.name)
        time.sleep(0.5)
    assert victim is not None, "process 1 never started"
    time.sleep(3.0)                                              # let it start its share
    os.kill(victim, signal.SIGKILL)
    start = time.time()
    _, err = launcher.communicate(timeout=120)
    assert time.time() - start < 30
    assert launcher.returncode != 0
    assert "slt-relu: process 1 of 2 was killed by signal 9; the run stopped (no results folder written" in err
    assert not out.exists()
    left = sorted(p.name for p in tmp_path.iterdir())      # process 0 was stopped by SIGTERM: no partial, no lock
    assert left == [".killed.checkpoints"] or left == [], left


def test_programs_are_shared_out_as_one_process_forms_them(tmp_path):
    """Process i of N runs programs i, i + N, ... of the single-process grouping; process 0 also gathers the
    others' checkpoints (here written beforehand, as the other process would) and returns every result."""
    points = [Point(i, {"i": i}, i) for i in range(5)]
    ran = []

    def program(pts):
        ran.append([p.index for p in pts])
        return [{"x": p.settings * 10} for p in pts]

    kw = dict(ident=lambda p: f"id{p.index}", signature=lambda p: 0, batch=2, checkpoints=tmp_path, progress=False)
    other = run_points(points, program, layout=(1, 2), **kw)
    assert ran == [[2, 3]] and sorted(other.results) == [2, 3]
    ran.clear()
    mine = run_points(points, program, layout=(0, 2), **kw)
    assert ran == [[0, 1], [4]] and {i: r["x"] for i, r in mine.results.items()} == {i: 10 * i for i in range(5)}
    with pytest.raises(ValueError, match="checkpoints: a run over several processes needs a checkpoint folder"):
        run_points(points, program, ident=lambda p: "x", layout=(0, 2), progress=False)


def test_a_failing_process_under_a_scheduler_stops_the_others(tmp_path):
    """Without the launcher (a scheduler starts the processes with --coordinator ...): process 1 fails at once
    (a config error), process 0 is stopped by JAX's coordination service within the heartbeat timeout instead
    of waiting for process 1's points, and no results folder is written."""
    from slt_relu.distributed import free_port

    out = tmp_path / "sched"
    port = free_port()
    common = ["--out", str(out), "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2",
              "--heartbeat-timeout", "5"]
    cmd0, env = cli(common + ["--process-id", "0"], **TINY)
    cmd1, _ = cli(common + ["--process-id", "1", "--set", "sampler.max_tree_depth=0"], **TINY)
    start = time.time()
    p0 = subprocess.Popen(cmd0, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p1 = subprocess.run(cmd1, env=env, capture_output=True, text=True, timeout=120)
    assert p1.returncode == 2 and "sampler.max_tree_depth" in p1.stderr and "process 1 of 2 stopped" in p1.stderr
    p0.communicate(timeout=180)
    assert p0.returncode != 0 and time.time() - start < 150
    assert not out.exists()
