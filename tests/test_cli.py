"""Command line, typed settings and their one-line errors; the shipped configs' tiny runs against their
references are in test_reference.py."""
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from slt_relu.workflow import cli, compare, runner
from slt_relu.workflow.config import ConfigError
from slt_relu.netcdf import read_tree

from tiny import LLC_TINY, TINY

ROOT = Path(__file__).resolve().parent.parent


def test_same_seed_same_numbers(tmp_path):
    cfg = ROOT / "experiments" / "fisher_rank_survey.toml"
    over = {**TINY["fisher_rank_survey.toml"], "fisher.points[0].widths": [2]}
    a = runner.run_config(cfg, tmp_path / "a", progress=False, overrides=over)
    b = runner.run_config(cfg, tmp_path / "b", progress=False, overrides=over)
    assert json.loads((a / "metrics.json").read_text()) == json.loads((b / "metrics.json").read_text())


def write(tmp_path, text):
    path = tmp_path / "cfg.toml"
    path.write_text(text)
    return path


POSTERIOR = """
kind = "posterior"
[truth]
name = "dslt4_pt1"
[posterior]
n = 100
[sampler]
num_warmup = 10
num_samples = 10
"""

GOOD = """
kind = "landscape"
[truth]
name = "dslt3_example_3_4"
[landscape]
ranges = [[-1.0, 2.0], [-1.0, 2.0]]
resolution = 9
"""


@pytest.mark.parametrize("text,message", [
    ("sede = 3\n" + GOOD, "sede: unknown key; expected one of description"),
    (GOOD + "sede = 3\n", "landscape.sede: unknown key"),
    (GOOD.replace("resolution = 9", "resolution = \"big\""), "landscape.resolution: expected an integer in [3, 4001]"),
    (GOOD.replace("resolution = 9", "resolution = 1"), "landscape.resolution: expected an integer in [3, 4001]"),
    (GOOD.replace("dslt3_example_3_4", "nope"), "truth.name: expected one of"),
    (GOOD.replace("[[-1.0, 2.0], [-1.0, 2.0]]", "[[2.0, -1.0], [-1.0, 2.0]]"), "landscape.ranges[0]: expected [low, high] with low < high"),
    (GOOD.replace("kind = \"landscape\"", "kind = \"bayes\""), "kind: expected one of"),
    (GOOD.replace("[landscape]", "[landscape]\nloss = \"kl\""), "landscape.loss: expected one of 'population'"),
    (GOOD.replace("[landscape]", "[landscape]\naxes = [\"w[0,0]\", \"w[5,0]\"]"), "landscape.axes: coordinate 'w[5,0]'"),
    (GOOD.replace("name = \"dslt3_example_3_4\"", "name = \"dslt3_example_3_2\"\ntheta0 = -1.0"), "truth: theta0"),
    (GOOD.replace("name = \"dslt3_example_3_4\"", "name = \"m_symmetric\"\nmm = 3"), "truth.mm: unknown key; expected one of bias, c, input_half_width, m, name, q, width"),
    (GOOD + "[inputs]\ndistribution = \"uniform\"\nhalf_width = -1.0\n", "inputs.half_width: expected a number in (0, 10000.0], got -1.0"),
    (GOOD.split("[landscape]")[0], "landscape: missing"),
    ("kind = \"landscape\"\n[truth\n", "not valid TOML"),
    ("kind = \"fisher\"\n[inputs]\ndistribution = \"gaussian\"\nstd = 1.0\nn_in = 2\n[fisher]\n[[fisher.points]]\nsource = \"degenerate\"\nwidth = 3\ncases = [\"active_on_box\"]\n",
     "fisher.points[0].cases: expected uniform inputs"),
    ("kind = \"fisher\"\n[inputs]\ndistribution = \"gaussian\"\nstd = 1.0\nn_in = 2\n[fisher]\n[[fisher.points]]\nsource = \"points\"\nwidth = 1\nparams = [[1.0, 2.0]]\n",
     "fisher.points[0].params[0]: expected 5 numbers"),
    ("kind = \"symmetry\"\n[truth]\nname = \"m_symmetric\"\n[symmetry]\nwidths = [2]\n",
     "symmetry.widths: expected a non-empty list of widths between m = 3"),
    ("kind = \"symmetry\"\n[truth]\nname = \"dslt3_example_3_4\"\n[symmetry]\nwidths = [2]\nchecks = -1\n",
     "symmetry.checks: expected an integer in [0, 100]"),
    ("kind = \"regions\"\n[regions]\n[regions.annulus]\nwidths = [3, 4, 1]\n",
     "regions.annulus.widths: expected [2, hidden widths..., 1]"),
    ("kind = \"functional_dimension\"\n[functional_dimension]\ndepths = [1]\n",
     "functional_dimension.depths: expected a non-empty list of integers >= 2"),
    (POSTERIOR + "[sweep]\nseed = [1, 2]\n", "sweep.seed: expected a key of [truth]"),
    (POSTERIOR + "[sweep]\ntruth.t = []\n", "sweep.truth.t: expected a non-empty list"),
    (POSTERIOR + "[sweep]\ntruth.t = [1.0, \"x\"]\n", "sweep point truth.t = 'x': truth.t: expected a number in [-10000.0, 10000.0], got 'x'"),
    (POSTERIOR.replace("n = 100", "n = 100\nbeta = \"bic\""), "posterior.beta: expected a number > 0 or one of 'wbic', got 'bic'"),
    (POSTERIOR + "name = \"hmc\"\nschedule = \"async\"\n",
     "sampler.schedule: unknown key; expected one of dense_mass, name, num_samples, num_steps, num_warmup"),
    (POSTERIOR + "name = \"mcmc\"\n", "sampler.name: expected one of 'nuts', 'hmc', 'smc', got 'mcmc'"),
    (POSTERIOR.replace("[sampler]\nnum_warmup = 10\nnum_samples = 10", "[sampler]\nname = \"smc\"\nnum_warmup = 10"),
     "sampler.num_warmup: unknown key; expected one of max_stages, name, num_leapfrog, num_mcmc_steps,"),
    (POSTERIOR.replace("[sampler]\nnum_warmup = 10\nnum_samples = 10",
                       "[sampler]\nname = \"smc\"\nwaste_free = true\nnum_particles = 100"),
     "sampler.num_particles: expected a multiple of num_mcmc_steps + 1 = 6 for waste-free SMC, got 100"),
    (POSTERIOR.replace("n = 100", "n = 100\nnum_samples = 10"), "posterior.num_samples: unknown key; expected one of beta,"),
    (POSTERIOR.replace("n = 100", "n = 100\npoints_per_program = 0"), "posterior.points_per_program: expected an integer >= 1 or"),
    (POSTERIOR + "[phases]\ncrossover = [\"degenerate\", \"reversed\"]\n[sweep]\ntruth.t = [1.0, 1.2]\n",
     "phases.crossover: expected two phase names of the radius rule"),
    (POSTERIOR + "[model]\nfree = [\"w[9,0]\"]\n", "model.free: coordinate 'w[9,0]'"),
    ("kind = \"learning_coefficient\"\n[llc]\n", "cases: missing; expected a non-empty list of tables"),
    ("kind = \"learning_coefficient\"\n[llc]\nmethods = [\"mcmc\"]\n[[cases]]\nname = \"a\"\nmodel = \"monomial\"\nexponents = [1]\n",
     "llc.methods: expected a non-empty list of 'sgld', 'beta_sweep', 'wbic', got ['mcmc']"),
    ("kind = \"learning_coefficient\"\n[llc]\n[[cases]]\nname = \"a\"\nmodel = \"monomial\"\nexponents = [1]\nmethods = []\n",
     "cases[0].methods: expected a non-empty list"),
    ("kind = \"learning_coefficient\"\n[llc]\n[[cases]]\nname = \"a\"\nmodel = \"monomial\"\nexponents = [1]\n[cases.sgld]\nnum_burnin = 30000\n",
     "cases[0].sgld.num_burnin: expected an integer below num_steps = 20000"),
    ("kind = \"learning_coefficient\"\n[llc]\n[[cases]]\nname = \"a\"\nmodel = \"two_layer\"\ntruth = \"m_symmetric\"\nwidth = 2\n",
     "cases[0].width: expected at least the truth's 3 nodes"),
])
def test_bad_config_one_line_error_no_folder(tmp_path, capsys, text, message):
    path = write(tmp_path, text)
    out = tmp_path / "out"
    code = cli.main(["run", str(path), "--out", str(out), "--no-progress", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".out*"))


def test_cli_subprocess_exit_code_and_list(tmp_path):
    path = write(tmp_path, "bogus = 1\n" + GOOD)
    res = subprocess.run([sys.executable, "-m", "slt_relu.workflow.cli", "run", str(path), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.strip() == (
        "slt-relu: config error: bogus: unknown key; expected one of description, dtype, inputs, kind, landscape, name, seed, "
        "sigma, truth")
    res = subprocess.run([sys.executable, "-m", "slt_relu.workflow.cli", "list"], capture_output=True, text=True)
    assert res.returncode == 0 and "dslt3_degenerate_node " in res.stdout and "landscape" in res.stdout


def test_interrupted_run_leaves_nothing_and_rerun_replaces(tmp_path, monkeypatch):
    path = write(tmp_path, GOOD)
    out = tmp_path / "out"
    first = runner.run_config(path, out, progress=False)
    stamp = json.loads((first / "manifest.json").read_text())["finished_utc"]
    from slt_relu.kinds import KINDS

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setitem(KINDS, "landscape", KINDS["landscape"]._replace(run=boom))
    with pytest.raises(KeyboardInterrupt):
        runner.run_config(path, tmp_path / "other", progress=False)
    assert not (tmp_path / "other").exists() and not list(tmp_path.glob(".other*"))
    monkeypatch.undo()
    runner.run_config(path, out, progress=False, overrides={"landscape.resolution": 11})
    assert read_tree(out / "results.nc")["loss"].sizes == {"x": 11, "y": 11}
    assert not list(tmp_path.glob(".out*")) and stamp


def test_override_syntax_errors(tmp_path):
    path = write(tmp_path, GOOD)
    with pytest.raises(ConfigError, match="has no entry 3"):
        runner.run_config(path, tmp_path / "o", overrides={"fisher.points[3].x": 1})


def test_landscape_empirical_and_directions(tmp_path):
    path = write(tmp_path, GOOD.replace("name = \"dslt3_example_3_4\"", "name = \"m_symmetric\"\nm = 3")
                 .replace("[[-1.0, 2.0], [-1.0, 2.0]]", "[[-1.0, 1.0], [-1.0, 1.0]]"))
    out = runner.run_config(path, tmp_path / "o", progress=False,
                            overrides={"landscape.mode": "directions", "landscape.loss": "empirical", "landscape.n": 300})
    Z = read_tree(out / "results.nc")["loss"].values
    m = json.loads((out / "metrics.json").read_text())
    assert Z.shape == (9, 9)
    # the centre of the plane is the truth: L_n there is the smallest value near the middle
    assert Z[4, 4] == pytest.approx(Z[3:6, 3:6].min())
    assert m["axes"] == ["direction 1", "direction 2"]


def test_fisher_sources_truth_true_set_path_points(tmp_path):
    text = """
kind = "fisher"
[truth]
name = "dslt3_example_3_4"
[fisher]
[[fisher.points]]
source = "truth"
[[fisher.points]]
source = "true_set"
count = 3
[[fisher.points]]
source = "path"
width = 1
start = [1.0, 0.0, 1.0, 0.0]
end = [1.0, 0.0, 0.0, 0.0]
steps = 3
[[fisher.points]]
source = "points"
width = 1
params = [[0.0, 0.0, 0.0, 0.0]]
"""
    out = runner.run_config(write(tmp_path, text), tmp_path / "o", progress=False)
    rows = json.loads((out / "metrics.json").read_text())["points"]
    assert [r["group"] for r in rows] == ["truth", "true_set", "true_set", "true_set", "path", "path", "path", "points"]
    assert [r["rank"] for r in rows[:4]] == [1, 1, 1, 1]  # restricted (w1, w2) model: rank 1 of 2 on W0
    # f = q relu(w x + b) + c with w = 1, b = 0: gradients x 1(x>0), 1(x>0), relu(x) = x 1(x>0), 1: rank 3;
    # at q = 0 the (w, b) gradients vanish: rank 2
    assert [r["rank"] for r in rows[4:7]] == [3, 3, 2]
    assert rows[7]["rank"] == 1  # all-zero network: only c moves f


# the tiny PT1 sweep of the three checkpoint and draws tests below, with a point per program and two chains per
# data set: run in one process (as pytest-xdist runs a file's neighbouring tests) they compile one sampling program
PT1 = {**TINY["dslt4_pt1_node_degeneracy.toml"], "posterior.points_per_program": 1, "posterior.chains_per_dataset": 2}


def test_interrupted_sweep_resumes_without_redoing_finished_points(tmp_path, monkeypatch, capsys):
    """Points run one program each; the second program is interrupted: no results folder, the first
    point's checkpoint stays; the rerun says so, reuses it and matches an uninterrupted run exactly."""
    from slt_relu.kinds import posterior_kind

    cfg = ROOT / "experiments" / "dslt4_pt1_node_degeneracy.toml"
    over = PT1
    clean = runner.run_config(cfg, tmp_path / "clean", progress=False, overrides=over)
    real = posterior_kind._run_program
    calls = []

    def flaky(points, key):
        calls.append([p.index for p in points])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(points, key)

    monkeypatch.setattr(posterior_kind, "_run_program", flaky)
    with pytest.raises(KeyboardInterrupt):
        runner.run_config(cfg, tmp_path / "res", progress=False, overrides=over)
    assert not (tmp_path / "res").exists() and not list(tmp_path.glob(".res.partial*"))
    assert sorted(p.name for p in (tmp_path / ".res.checkpoints").iterdir()) == ["point-00000.nc"]
    calls.clear()
    capsys.readouterr()
    out = runner.run_config(cfg, tmp_path / "res", progress=False, overrides=over)
    assert calls == [[1]]                                        # only the unfinished point ran
    assert "resuming: 1 of 2 sweep points done" in capsys.readouterr().err
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (clean, out))
    assert b["resumed_points"] == [0] and a["resumed_points"] == []
    assert a["mass"] == b["mass"] and a["points"][0]["mean_loss_per_trial"] == b["points"][0]["mean_loss_per_trial"]
    assert not (tmp_path / ".res.checkpoints").exists()        # removed once the results are in place
    # a changed config does not reuse stale checkpoints (here beta: the points' n beta, which is in their
    # fingerprint but not in the compiled program's signature, so no program is compiled again for it)
    monkeypatch.setattr(posterior_kind, "_run_program", flaky)
    calls.clear()
    with pytest.raises(KeyboardInterrupt):
        runner.run_config(cfg, tmp_path / "res2", progress=False, overrides=over)
    calls.clear()

    def recording(points, key):
        calls.append([p.index for p in points])
        return real(points, key)

    monkeypatch.setattr(posterior_kind, "_run_program", recording)
    runner.run_config(cfg, tmp_path / "res2", progress=False, overrides={**over, "posterior.beta": 1.0})
    assert calls == [[0], [1]]


def test_learning_coefficient_cases_resume(tmp_path, monkeypatch, capsys):
    """Each case of a learning_coefficient config is a checkpointed point: an interrupted run
    resumes at the first unfinished case."""
    from slt_relu.kinds import llc_kind

    cfg = ROOT / "experiments" / "llc_dslt4_phases.toml"
    over = {**LLC_TINY, "llc.sgld.num_steps": 30}
    real = llc_kind.case_result
    calls = []

    def flaky(c, *args):
        calls.append(c.index)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(c, *args)

    monkeypatch.setattr(llc_kind, "case_result", flaky)
    with pytest.raises(KeyboardInterrupt):
        runner.run_config(cfg, tmp_path / "res", progress=False, overrides=over)
    calls.clear()
    capsys.readouterr()
    monkeypatch.setattr(llc_kind, "case_result", lambda c, *args: calls.append(c.index) or real(c, *args))
    out = runner.run_config(cfg, tmp_path / "res", progress=False, overrides=over)
    assert calls == [1, 2] and "resuming: 1 of 3 cases done" in capsys.readouterr().err
    assert json.loads((out / "metrics.json").read_text())["resumed_cases"] == [0]


def _settings(capsys, *args):
    code = cli.main(["settings", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _keys(text, markdown):
    """The keys a `slt-relu settings` output lists, in order (a table row's first cell, or a line's key)."""
    pattern = r"^\| `([^`]+)` \|" if markdown else r"^([a-z_][\w.\[\]]*): "
    return re.findall(pattern, text, flags=re.M)


def test_settings_tables_in_the_docs_are_the_schemas(capsys):
    """The site's settings page is generated from the schemas: its block is `slt-relu settings --markdown`."""
    readme = (ROOT / "docs" / "settings.md").read_text()
    begin, end = "<!-- settings: begin (slt-relu settings --markdown) -->\n", "\n<!-- settings: end -->"
    assert begin in readme and end in readme
    code, out, _ = _settings(capsys, "--markdown")
    assert code == 0 and readme.split(begin)[1].split(end)[0] + "\n" == out


@pytest.mark.parametrize("markdown", [False, True])
def test_settings_of_a_kind_list_each_key_once(capsys, markdown):
    from slt_relu.kinds import KINDS

    flag = ["--markdown"] if markdown else []
    for kind in sorted(KINDS):
        code, out, _ = _settings(capsys, kind, *flag)
        keys = _keys(out, markdown)
        assert code == 0 and len(keys) > 5 and len(keys) == len(set(keys)), kind
    code, out, _ = _settings(capsys, "posterior", *flag)
    keys = _keys(out, markdown)
    assert keys.count("truth.theta0") == 1 and "truth.t" in keys
    assert "sampler.max_tree_depth" in keys and "sampler.num_particles" not in keys   # the default sampler: NUTS
    assert "compare.name" in keys and not any(k.startswith("compare.") and k != "compare.name" for k in keys)
    # every kind at once: each sampler in a section of its own, each key once per section
    code, out, _ = _settings(capsys, *flag)
    sections = re.split(r"^(?:## |### )?`?(?:kind = |\[sampler\] name = )", out, flags=re.M)
    assert code == 0 and len(sections) == len(KINDS) + 3 + 1
    for section in sections:
        keys = _keys(section, markdown)
        assert len(keys) == len(set(keys))


@pytest.mark.parametrize("markdown", [False, True])
def test_settings_show_the_chosen_samplers_keys(capsys, markdown):
    flag = ["--markdown"] if markdown else []
    code, out, _ = _settings(capsys, "posterior", "--sampler", "smc", *flag)
    keys = _keys(out, markdown)
    assert code == 0 and len(keys) == len(set(keys))
    assert {"sampler.num_particles", "sampler.waste_free", "sampler.max_stages"} <= set(keys)
    assert not {"sampler.max_tree_depth", "sampler.slots", "sampler.num_warmup", "sampler.trajectory_length"} & set(keys)
    assert 'name = "smc"' in out
    # a config picks its sampler, truth (and --sampler overrides its sampler)
    code, out, _ = _settings(capsys, "dslt4_pt2_smc", *flag)
    keys = _keys(out, markdown)
    assert code == 0 and "sampler.num_particles" in keys and "sampler.max_tree_depth" not in keys
    assert "truth.v" in keys and "truth.t" not in keys and "truth.theta0" not in keys
    code, out, _ = _settings(capsys, str(ROOT / "experiments" / "dslt4_pt1_node_degeneracy.toml"), *flag)
    keys = _keys(out, markdown)
    assert code == 0 and "sampler.max_tree_depth" in keys and "sampler.num_particles" not in keys and "truth.t" in keys
    code, out, _ = _settings(capsys, "dslt4_pt1_smc", "--sampler", "hmc", *flag)
    keys = _keys(out, markdown)
    assert code == 0 and "sampler.trajectory_length" in keys and "sampler.num_particles" not in keys


@pytest.mark.parametrize("args, message", [
    (["posterior", "--sampler", "sgld"], "settings --sampler: expected one of nuts, hmc, smc, got 'sgld'"),
    (["landscape", "--sampler", "smc"], "kind 'landscape' has no [sampler] table (kinds with one: posterior)"),
    (["--sampler", "smc"], "settings --sampler: expected a kind or a config too"),
    (["posteriors"], "settings posteriors: expected a kind (fisher, "),
])
def test_settings_bad_choice_is_one_line(capsys, args, message):
    code, out, err = _settings(capsys, *args)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err and "Traceback" not in err


def test_kept_checkpoints_are_reanalysed_without_sampling(tmp_path, monkeypatch, capsys):
    """--keep-checkpoints: the draws stay, and a rerun with another phase rule analyses them again
    (a point's fingerprint covers what determines its draws, not the analysis)."""
    from slt_relu.kinds import posterior_kind

    cfg = ROOT / "experiments" / "dslt4_pt1_node_degeneracy.toml"
    over = PT1
    first = json.loads((runner.run_config(cfg, tmp_path / "a", progress=False, overrides=over,
                                          keep_checkpoints=True) / "metrics.json").read_text())
    assert (tmp_path / ".a.checkpoints").is_dir()

    def refuse(points, key):
        raise AssertionError("sampled again")

    monkeypatch.setattr(posterior_kind, "_run_program", refuse)
    capsys.readouterr()
    again = runner.run_config(cfg, tmp_path / "a", progress=False, overrides={
        **over, "phases.rule": "sector", "phases.crossover": ["reversed", "true_orientation"]})
    assert "resuming: 2 of 2 sweep points done" in capsys.readouterr().err
    metrics = json.loads((again / "metrics.json").read_text())
    assert set(metrics["mass"]) == {"other", "true_orientation", "reversed"}
    assert metrics["resumed_wall_s"] > 0 and first["resumed_wall_s"] == 0      # the sampling the rerun did not redo
    assert metrics["points"][0]["mean_loss_per_trial"] == first["points"][0]["mean_loss_per_trial"]
    assert not (tmp_path / ".a.checkpoints").exists()


def test_posterior_draws_as_netcdf_the_printed_headline_and_show(tmp_path, capsys):
    """A tiny posterior sweep with two chains per data set: each point's draws in draws/point-NNNNN.nc, which
    xarray reads and arviz-stats summarises with an R-hat per data set (never pooled); the run prints its
    masses per point with error bars and the crossover; `slt-relu show` prints the folder's summary."""
    import xarray as xr
    import arviz_stats as azs

    cfg = ROOT / "experiments" / "dslt4_pt1_node_degeneracy.toml"
    out = tmp_path / "res"
    sets = [f"{k}={json.dumps(v)}" for k, v in PT1.items()]
    assert cli.main(["run", str(cfg), "--out", str(out), "--no-progress", "--no-cache"]
                    + sum((["--set", s] for s in sets), [])) == 0
    printed = capsys.readouterr().out
    assert re.search(r"truth\.t = 1: other [0-9.]+ \+- [0-9.]+ \(MC [0-9.]+\), degenerate", printed), printed
    assert "crossover of degenerate and non_degenerate along t" in printed and f"results written to {out}" in printed
    with xr.open_datatree(out / "draws" / "point-00001.nc", engine="h5netcdf") as tree:
        assert dict(tree["posterior"].sizes) == {"chain": 2, "draw": 40, "dataset": 2, "node": 2, "input": 2}
        assert {"energy", "tree_depth", "lp", "diverging"} <= set(tree["sample_stats"].data_vars)
        assert tree["observed_data"]["y"].shape == (2, 200)
        table = azs.summary(tree, var_names=["loss", "c"])
        assert len(table) == 4 and table["r_hat"].notna().all()      # one row per variable and data set
    metrics = json.loads((out / "metrics.json").read_text())
    assert all("rhat_nested_loss" in p["diagnostics"] for p in metrics["points"])
    assert cli.main(["show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "kind posterior, seed 0" in shown and "truth.t = 1.571:" in shown and "plots: " in shown
    assert "draws: 2 netCDF files in draws/" in shown and "not here" not in shown
    (out / "draws" / "point-00001.nc").unlink()                   # as in a committed results folder (no draws/)
    assert cli.main(["show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "draws: 1 netCDF files in draws/" in shown and "draws: 1 netCDF files the run wrote are not here" in shown
    assert cli.main(["show", str(tmp_path)]) == 2
    assert "expected a results folder of slt-relu" in capsys.readouterr().err


def test_an_axis_with_a_value_twice_is_refused_in_one_line():
    """A sweep list and a functional_dimension axis are coordinates of results.nc: each value once."""
    import jax

    x64 = jax.config.read("jax_enable_x64")
    try:                                       # prepare sets the config's dtype before the sweep is expanded
        with pytest.raises(runner.ConfigError, match=r"^sweep\.truth\.t: expected distinct values, got 1\.0 more "
                                                     r"than once$"):
            runner.prepare(ROOT / "experiments" / "dslt4_pt1_smc.toml", {"sweep.truth.t": [1.0, 1.2, 1.0]})
    finally:
        jax.config.update("jax_enable_x64", x64)
    with pytest.raises(runner.ConfigError, match=r"^functional_dimension\.depths: .*expected distinct values, got 2"):
        runner.prepare(ROOT / "experiments" / "functional_dimension_depth_width.toml",
                       {"functional_dimension.depths": [2, 3, 2]})


def test_overrides_leave_their_values_alone():
    """A key that sets inside a table an earlier override put there changes the config, not the override's value
    (the tests reuse tests/tiny.py's overrides across runs)."""
    from slt_relu.workflow.config import apply_overrides

    cases = [{"name": "a", "k": [1]}]
    overrides = {"cases": cases, "cases[0].name": "b"}
    out = apply_overrides({"cases": []}, overrides)
    assert out["cases"][0]["name"] == "b"
    assert cases == [{"name": "a", "k": [1]}] and overrides["cases"] is cases
