"""The command line refuses what the machine cannot run or where results do not belong, with one line and
exit 2 before anything starts: process counts beyond the cores, flags out of range, config names that are
paths, seeds the PRNG cannot take, output and cache folders the file system refuses; a closed pipe ends
quietly; workers of a local multi-process run end with their launcher, kill -9 included."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slt_relu.workflow import cli
from test_cli import GOOD, ROOT


def refused(capsys, argv, message, cwd=None):
    here = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        code = cli.main(argv)
    finally:
        os.chdir(here)
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "cfg.toml"
    path.write_text(GOOD)
    return path


@pytest.mark.parametrize("flags,message", [
    (["--processes", "100000"], "--processes: expected an integer in [1, "),
    (["--processes", "0"], "--processes: expected an integer in [1, "),
    (["--processes", "100000", "--oversubscribe"], "--processes: expected an integer in [1, "),
    (["--heartbeat-timeout", "-5"], "--heartbeat-timeout: expected seconds in [1, 86400], got -5"),
    (["--heartbeat-timeout", "0"], "--heartbeat-timeout: expected seconds in [1, 86400], got 0"),
    (["--num-processes", "0", "--coordinator", "127.0.0.1:1", "--process-id", "0"],
     "--num-processes: expected a positive integer, got 0"),
    (["--num-processes", "2", "--coordinator", "127.0.0.1:1", "--process-id", "-1"],
     "--process-id: expected an integer >= 0, got -1"),
])
def test_process_flags_are_bounded(tmp_path, config, capsys, flags, message):
    refused(capsys, ["run", str(config), "--out", str(tmp_path / "o"), "--no-progress", "--no-cache"] + flags, message)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("flags,message", [
    (["--out", "/proc/slt_relu_x"], "--out /proc/slt_relu_x: is on a special file system (/proc)"),
    (["--out", "/sys/slt_relu_x/res"], "is on a special file system (/sys)"),
    (["--out", "{tmp}/" + "x" * 300], "bytes; expected at most"),
    (["--out", "{tmp}/" + "x/" * 2100], "--out: the path is"),
    (["--cache-dir", "{tmp}/cfg.toml"], "--cache-dir {tmp}/cfg.toml: is a file; expected a folder"),
    (["--cache-dir", "/proc/slt_relu_cache"], "--cache-dir /proc/slt_relu_cache: is on a special file system"),
    (["--cache-dir", "{tmp}/cfg.toml/cache"], "cfg.toml is a file; expected a folder path"),
])
def test_output_and_cache_folders_the_file_system_refuses(tmp_path, config, capsys, flags, message):
    flags = [f.format(tmp=tmp_path) for f in flags]
    out = [] if "--out" in flags else ["--out", str(tmp_path / "o")]
    refused(capsys, ["run", str(config), "--no-progress"] + out + flags, message.format(tmp=tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg.toml"]


@pytest.mark.parametrize("line,message", [
    ('name = "../../escape"', "name: expected a plain file name"),
    ('name = "a/b"', "name: expected a plain file name"),
    ('name = ".hidden"', "name: expected a plain file name"),
    ('name = "' + "n" * 101 + '"', "name: expected a plain file name"),
    ("seed = 9223372036854775808", "seed: expected an integer in [0, 9223372036854775807]"),
    ("seed = -1", "seed: expected an integer in [0, 9223372036854775807]"),
])
def test_config_names_stay_plain_and_seeds_fit_the_prng(tmp_path, capsys, line, message):
    """Without --out the folder is runs/NAME under the working directory: a bad name or seed writes nothing,
    not even runs/."""
    path = tmp_path / "cfg.toml"
    path.write_text(line + "\n" + GOOD)
    work = tmp_path / "work" / "deeper"
    work.mkdir(parents=True)
    refused(capsys, ["run", str(path), "--no-progress", "--no-cache"], message, cwd=work)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["cfg.toml", "deeper", "work"]


def test_a_closed_pipe_ends_quietly():
    res = subprocess.run(f"{sys.executable} -m slt_relu.workflow.cli list | head -c 10", shell=True, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0 and "Traceback" not in res.stderr and "BrokenPipe" not in res.stderr, res.stderr
    proc = subprocess.Popen([sys.executable, "-m", "slt_relu.workflow.cli", "list"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()                                     # the reader is gone before anything is written
    assert proc.wait(timeout=120) == 0 and proc.stderr.read() == b""


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process parents from /proc (Linux)")
def test_workers_end_when_their_launcher_is_killed(tmp_path):
    """slt-relu run --processes 2, then kill -9 of the launcher: no worker survives it for long (each watches
    its parent and ends itself)."""
    over = {"posterior.n": 2000, "posterior.datasets": 2, "sampler.num_warmup": 60, "sampler.num_samples": 4000,
            "sweep.truth.t": [1.0, 1.5707963267948966], "posterior.points_per_program": 1}
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    launcher = subprocess.Popen(
        [sys.executable, "-m", "slt_relu.workflow.cli", "run", str(ROOT / "experiments" / "dslt4_pt1_node_degeneracy.toml"),
         "--out", str(tmp_path / "res"), "--no-progress", "--no-cache", "--processes", "2", "--oversubscribe",
         *sum((["--set", f"{k}={json.dumps(v)}"] for k, v in over.items()), [])],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while len(_children(launcher.pid)) < 2 and time.time() < deadline and launcher.poll() is None:
        time.sleep(0.1)
    workers = _children(launcher.pid)
    assert len(workers) == 2, "the launcher did not start its 2 workers"
    time.sleep(3)                                           # the workers are importing JAX or joining the run
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()
    deadline = time.time() + 30
    while any(_alive(w) for w in workers) and time.time() < deadline:
        time.sleep(0.2)
    survivors = [w for w in workers if _alive(w)]
    for w in survivors:
        os.kill(w, signal.SIGKILL)
    assert not survivors, f"workers {survivors} outlived their launcher"


def _real_truth_options():
    """(truth name, option) for every real option of every registered example."""
    import inspect
    import typing

    from slt_relu import truths

    for name in truths.names():
        fn = truths.REGISTRY[name]
        hints = typing.get_type_hints(fn)
        for option in inspect.signature(fn).parameters:
            if hints.get(option, float) is float:
                yield name, option


@pytest.mark.parametrize("value", [1e153, -2e4, 1e-300, -3e-5])
@pytest.mark.parametrize("truth,option", list(_real_truth_options()))
def test_a_truths_real_options_are_zero_or_resolved_magnitudes(tmp_path, capsys, truth, option, value):
    """A weight of 1e153 overflows the population loss's squares and one of 1e-300 underflows them (a truth that
    is minimal on paper and degenerate in floating point): both are refused by name before anything runs."""
    path = tmp_path / "cfg.toml"
    path.write_text(f'kind = "landscape"\n[truth]\nname = "{truth}"\n{option} = {value!r}\n[landscape]\n'
                    'ranges = [[-1.0, 2.0], [-1.0, 2.0]]\nresolution = 9\n')
    refused(capsys, ["run", str(path), "--no-progress", "--no-cache", "--out", str(tmp_path / "o")],
            f"truth.{option}: expected")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("line", ["sigma = 1e20", "[inputs]\ndistribution = \"uniform\"\nhalf_width = 1e300",
                                  "[inputs]\ndistribution = \"gaussian\"\nstd = 2e4"])
def test_the_setups_scales_are_bounded(tmp_path, capsys, line):
    key = {"s": "sigma", "[": "inputs.half_width" if "half" in line else "inputs.std"}[line[0]]
    path = tmp_path / "cfg.toml"
    path.write_text(line + "\n" + GOOD if line.startswith("sigma") else GOOD + line + "\n")
    refused(capsys, ["run", str(path), "--no-progress", "--no-cache", "--out", str(tmp_path / "o")], f"{key}: expected")
