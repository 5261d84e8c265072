"""The runner never destroys data: --out refuses files, users' folders and unwritable places (exit 2,
one line, nothing computed); an earlier results folder is replaced whole; runs are atomic, locked,
clean up after killed runs by name and pid only, resume after kill -9, and leave git status clean."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slt_relu.workflow import cli, runner

from test_cli import GOOD, ROOT


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "cfg.toml"
    path.write_text(GOOD)
    return path


@pytest.fixture
def no_compute(monkeypatch):
    """Fail if any kind starts computing."""
    from slt_relu.kinds import KINDS

    def refuse(*args, **kwargs):
        raise AssertionError("computed although the run should have been refused")

    for name, kind in list(KINDS.items()):
        monkeypatch.setitem(KINDS, name, kind._replace(run=refuse))


def refused(capsys, argv, message):
    code = cli.main(argv + ["--no-progress", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_out_refuses_a_file(tmp_path, config, capsys, no_compute):
    target = tmp_path / "notes.txt"
    target.write_text("my notes")
    refused(capsys, ["run", str(config), "--out", str(target)], f"--out {target}: is a file")
    assert target.read_text() == "my notes" and not list(tmp_path.glob(".notes*"))


def test_out_refuses_a_users_folder_and_the_results_tree(tmp_path, config, capsys, no_compute):
    users = tmp_path / "thesis"
    (users / "chapter1").mkdir(parents=True)
    (users / "draft.tex").write_text("\\section{}")
    before = snapshot(users)
    refused(capsys, ["run", str(config), "--out", str(users)], "holds files that are not an earlier slt-relu results")
    assert snapshot(users) == before
    # the folder of all results (results/README.md and one folder per config) is not a results folder
    tree = tmp_path / "results"
    shutil.copytree(ROOT / "results" / "dslt3_degenerate_node", tree / "dslt3_degenerate_node")
    (tree / "README.md").write_text("the table")
    before = snapshot(tree)
    refused(capsys, ["run", str(config), "--out", str(tree)], "holds files that are not an earlier slt-relu results")
    assert snapshot(tree) == before


def test_out_refuses_a_results_folder_holding_a_users_file(tmp_path, config, capsys):
    out = runner.run_config(config, tmp_path / "res", progress=False)
    (out / "my_analysis.py").write_text("print(1)")
    before = snapshot(out)
    refused(capsys, ["run", str(config), "--out", str(out)], "holds files that are not an earlier slt-relu results")
    assert snapshot(out) == before


def test_out_refuses_an_early_results_folder_without_a_file_list(tmp_path, config, capsys):
    out = runner.run_config(config, tmp_path / "res", progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["files"]                                  # as the tool wrote manifests before file lists
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "notes.json").write_text('{"mine": true}')     # looks like the tool's, is the user's
    before = snapshot(out)
    refused(capsys, ["run", str(config), "--out", str(out)], "manifest lists no files")
    assert snapshot(out) == before


@pytest.mark.parametrize("out,message", [
    ("", "--out: expected a folder path, got ''"),
    ("{tmp}/notes.txt/res", "notes.txt is a file; expected a folder path"),
    ("/proc/slt_relu_nope/res", "--out /proc/slt_relu_nope/res: "),
])
def test_out_refuses_unwritable_places(tmp_path, config, capsys, no_compute, out, message):
    (tmp_path / "notes.txt").write_text("x")
    refused(capsys, ["run", str(config), "--out", out.format(tmp=tmp_path)], message.format(tmp=tmp_path))


def test_config_mistakes_before_computing(tmp_path, capsys, no_compute):
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    refused(capsys, ["run", str(binary)], "model.bin: not a text file (expected a TOML config)")
    refused(capsys, ["run", str(tmp_path / "missing.toml")], "missing.toml: no such config file")
    refused(capsys, ["run", "no_such_experiment"], "no_such_experiment: no such config file or shipped config")
    assert not list(tmp_path.glob(".*")) and not (Path.cwd() / "runs" / "no_such_experiment").exists()


def test_an_earlier_results_folder_is_replaced_whole(tmp_path, config):
    out = runner.run_config(config, tmp_path / "res", progress=False)
    stamp = json.loads((out / "manifest.json").read_text())["finished_utc"]
    (out / "stale_plot.png").write_bytes(b"from an older version")         # a file the tool wrote: not the user's
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"].append("stale_plot.png")
    (out / "manifest.json").write_text(json.dumps(manifest))
    runner.run_config(config, out, progress=False, overrides={"landscape.resolution": 11})
    assert not (out / "stale_plot.png").exists() and stamp
    assert json.loads((out / "manifest.json").read_text())["overrides"] == {"landscape.resolution": 11}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_list_names_are_accepted_by_run(capsys):
    assert cli.main(["list"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == len(runner.shipped_configs())
    for line in lines:
        name, kind = line.split()[:2]
        prep = runner.prepare(name)                       # validates and resolves, computes nothing
        assert prep.path == runner.EXPERIMENTS_DIR / f"{name}.toml" and prep.settings.kind == kind
    assert any(" min " in line or " s " in line for line in lines)         # the committed run time
    import jax
    jax.config.update("jax_enable_x64", True)


def test_stale_partials_of_dead_runs_are_removed_by_name_and_pid(tmp_path, config):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)                                  # a process that has exited
    stale = tmp_path / f".res.partial-{pid}"
    stale.mkdir()
    (stale / "metrics.json").write_text("{}")
    live = tmp_path / f".res.partial-{os.getppid()}"        # a live process's (the test runner's parent)
    live.mkdir()
    other = tmp_path / f".other.partial-{pid}"              # another folder's
    other.mkdir()
    users = tmp_path / ".res.partial-notes"                 # not a pid: not ours
    users.mkdir()
    runner.run_config(config, tmp_path / "res", progress=False)
    assert not stale.exists() and live.exists() and other.exists() and users.exists()
    # a run killed between moving the old results aside and the new ones in: the old ones come back
    out = tmp_path / "res"
    aside = tmp_path / f".res.old-{pid}"
    out.rename(aside)
    runner.check_output(out)
    assert runner.clean_stale(out) == [] and out.is_dir() and not aside.exists()


def test_a_second_run_on_the_same_folder_is_refused_while_the_first_runs(tmp_path, config, capsys, no_compute):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / ".res.lock").write_text(str(sleeper.pid))
        refused(capsys, ["run", str(config), "--out", str(tmp_path / "res")], "another run (pid")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert (tmp_path / ".res.lock").exists()              # the other run's lock is not ours to remove


def _cli(args, cwd, **kw):
    return subprocess.Popen([sys.executable, "-m", "slt_relu.workflow.cli", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


# a shipped sweep shrunk with --set only: 4 points of 2 trials, two programs of 2 points
SHRUNK = ["--set", "posterior.n=200", "--set", "posterior.datasets=2", "--set", "posterior.points_per_program=2",
          "--set", "sampler.num_warmup=40", "--set", "sampler.num_samples=20",
          "--set", "sweep.truth.t=[1.0, 1.16, 1.32, 1.48]",
          "--set", "plots.trace_points=0", "--no-progress"]


def test_kill_9_then_rerun_resumes_a_shipped_sweep(tmp_path):
    env = dict(os.environ, SLT_RELU_CACHE_DIR=str(tmp_path / "cache"), JAX_PLATFORMS="cpu")
    out = tmp_path / "pt1"
    proc = _cli(["run", "dslt4_pt1_node_degeneracy", "--out", str(out), *SHRUNK], tmp_path, env=env)
    checkpoints = tmp_path / ".pt1.checkpoints"
    deadline = time.time() + 240
    while not list(checkpoints.glob("point-*.nc")) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert proc.poll() is None, "the sweep finished before it could be killed: " + proc.stderr.read()[-2000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(list(checkpoints.glob("point-*.nc")))
    assert 1 <= done < 4 and not out.exists() and list(tmp_path.glob(".pt1.partial-*"))
    again = _cli(["run", "dslt4_pt1_node_degeneracy", "--out", str(out), *SHRUNK], tmp_path, env=env)
    stdout, stderr = again.communicate(timeout=600)
    assert again.returncode == 0, stderr[-3000:]
    assert f"resuming: {done} of 4 sweep points done" in stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["resumed_points"] == list(range(done)) and len(metrics["points"]) == 4
    assert not list(tmp_path.glob(".pt1.*"))              # partial of the killed run, checkpoints, lock: all gone
    # that the points read back from checkpoints equal an uninterrupted run's is tests/test_cli.py's
    # test_interrupted_sweep_resumes_without_redoing_finished_points (in process, cheaper than a third run here)


def test_readme_first_command_leaves_git_status_clean(tmp_path):
    """README's first command in a fresh clone (with this environment instead of a new one): the
    default run writes runs/NAME/, which git ignores, and touches nothing tracked."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    for path in ("slt_relu", "experiments", "results", ".gitignore"):      # the working tree under test
        src = ROOT / path
        if src.is_dir():
            shutil.rmtree(clone / path)
            shutil.copytree(src, clone / path, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, clone / path)
    subprocess.run(["git", "add", "-A"], cwd=clone, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tree under test",
                    "--allow-empty"], cwd=clone, check=True)
    readme = (ROOT / "README.md").read_text()
    first = next(line for line in readme.splitlines() if "slt-relu run" in line and line.startswith("python3 -m venv"))
    run_part = first.split("&&")[-1].strip()
    assert run_part.startswith(".venv/bin/slt-relu run ")
    env = dict(os.environ, PYTHONPATH=str(clone), SLT_RELU_CACHE_DIR=str(tmp_path / "cache"))
    args = run_part.split()[1:] + ["--no-progress"]
    res = subprocess.run([sys.executable, "-m", "slt_relu.workflow.cli", *args], cwd=clone, env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert (clone / "runs" / "dslt3_degenerate_node" / "metrics.json").exists()
    status = subprocess.run(["git", "status", "--porcelain", "--ignored=no"], cwd=clone, capture_output=True,
                            text=True).stdout
    assert status == "", status
    manifest = json.loads((clone / "runs" / "dslt3_degenerate_node" / "manifest.json").read_text())
    assert manifest["git_commit"] and not manifest["git_commit"].endswith("+dirty")


def test_show_groups_warnings_by_what_they_say(tmp_path):
    """slt-relu show: warnings that say the same thing of different places (numbers masked) are one group, counted,
    with its first two; --all lists every one."""
    from slt_relu.workflow.report import _warning_lines, warning_groups

    warnings = [f"t = {t}: runs on data set {k} differ by {1 + t:.2f} nats in log evidence" for t in range(5)
                for k in (0, 1)] + ["t = 3: the mass of degenerate rests on fewer than 20 of the 512 particles",
                                    "t = 4: the mass of degenerate rests on fewer than 20 of the 512 particles",
                                    "t = 1: R-hat of L_n is 1.2 in W0"]
    groups = warning_groups(warnings)
    assert [(what, len(items)) for what, items in groups] == [
        ("runs on data set N differ by N nats in log evidence", 10),
        ("the mass of degenerate rests on fewer than N of the N particles", 2), ("R-hat of L_n is N in W0", 1)]
    lines = _warning_lines(warnings, every=False)
    assert lines[0] == "  10 x runs on data set N differ by N nats in log evidence"
    assert lines[1:3] == [f"      {w}" for w in warnings[:2]] and "and 8 more" in lines[3]
    assert lines[-1] == "  t = 1: R-hat of L_n is 1.2 in W0"
    assert _warning_lines(warnings, every=True) == [f"  {w}" for w in warnings]


def test_a_shipped_config_is_recorded_relative_to_the_checkout():
    assert runner.recorded_path(runner.EXPERIMENTS_DIR / "dslt4_pt1_smc.toml") == "experiments/dslt4_pt1_smc.toml"
    assert runner.recorded_path(Path("/tmp/elsewhere/x.toml")) == "/tmp/elsewhere/x.toml"


def test_plot_of_something_else_is_one_line(tmp_path, capsys):
    """slt-relu plot on a folder that is not a results folder, or one without results.nc: one line, exit 2, and
    nothing written."""
    code = cli.main(["plot", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "plot " in err and "expected a results folder" in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())


def test_plot_of_an_older_results_nc_names_the_missing_variable(tmp_path, capsys):
    """slt-relu plot on a results.nc without a variable the figures now draw: one line naming the variable (not
    xarray's message about it) and asking for a rerun, exit 2."""
    import shutil

    from slt_relu.netcdf import read_tree, write_tree

    folder = tmp_path / "old"
    folder.mkdir()
    shutil.copy(runner.RESULTS_DIR / "dslt3_degenerate_node" / "manifest.json", folder)
    write_tree(read_tree(runner.RESULTS_DIR / "dslt3_degenerate_node" / "results.nc").to_dataset().drop_vars("loss"),
               folder / "results.nc")
    code = cli.main(["plot", str(folder), "--out", str(tmp_path / "figures")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "its results.nc has no 'loss', which this version's figures of kind 'landscape' draw" in err
    assert "run the config again" in err
