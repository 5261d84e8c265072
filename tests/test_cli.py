"""Command line, typed settings and their one-line errors, and every shipped config with tiny
settings against the numbers the toolkit gave before the experiment layer was rebuilt."""
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from slt_relu import cli, runner
from slt_relu.config import ConfigError

ROOT = Path(__file__).resolve().parent.parent
LLC_TINY = {"llc.n": 300, "llc.sgld.num_chains": 2, "llc.sgld.num_steps": 60, "llc.sgld.num_burnin": 10,
            "llc.sgld.thin": 1}
POSTERIOR_TINY = {"posterior.n": 200, "posterior.datasets": 2, "sampler.num_warmup": 60, "sampler.num_samples": 40,
                  "phases.classify_every": 4}
SMC_TINY = {"posterior.n": 200, "posterior.datasets": 2, "posterior.chains_per_dataset": 2,
            "sampler.num_particles": 64, "phases.classify_every": 4}

TINY = {
    "dslt3_degenerate_node.toml": {"landscape.resolution": 15, "landscape.fisher_points": 3},
    "dslt3_scaling_valley.toml": {"landscape.resolution": 15, "landscape.fisher_points": 3},
    "fisher_rank_survey.toml": {
        "inputs.cells": 12,
        "fisher.points[0].widths": [1, 3], "fisher.points[0].count": 1,
        "fisher.points[1].m": [3],
        "fisher.points[2].cases": ["q_zero"],
        "fisher.points[3].cases": ["active_on_box"],
        "fisher.points[4].widths": [2], "fisher.points[4].count": 1,
    },
    "true_set_m_symmetric.toml": {"symmetry.widths": [3, 4], "symmetry.checks": 1},
    "linear_regions_xor.toml": {"regions.resolution": 41, "regions.xor_wide.steps": 50, "regions.xor_wide.width": 6,
                                "regions.annulus.steps": 50, "regions.annulus.samples": 100,
                                "regions.lines.widths": [4, 8], "regions.lines.lines": 3},
    "functional_dimension_depth_width.toml": {"functional_dimension.n_in": [3], "functional_dimension.depths": [2, 3],
                                              "functional_dimension.networks": 3},
    "dslt4_pt1_node_degeneracy.toml": {**POSTERIOR_TINY, "sweep.truth.t": [1.0, 1.5707963267948966]},
    "dslt4_pt2_orientation_reversal.toml": {**POSTERIOR_TINY, "sweep.truth.v": [1.0, 3.0]},
    "dslt4_pt1_phase_diagram.toml": {**POSTERIOR_TINY, "sweep.truth.t": [1.0, 1.5707963267948966],
                                     "sweep.posterior.beta": ["wbic", 1.0]},
    "llc_known_values.toml": {**LLC_TINY, "llc.beta_sweep.num_warmup": 30, "llc.beta_sweep.num_samples": 20,
                              "llc.beta_sweep.chains_per_beta": 2, "llc.calibration.step_sizes": [1e-5, 1e-4],
                              "llc.calibration.localizations": [1.0], "llc.calibration.num_steps": 60,
                              "llc.calibration.num_burnin": 10},
    "llc_dslt4_phases.toml": LLC_TINY,
    "dslt4_pt1_smc.toml": {**SMC_TINY, "compare.num_warmup": 30, "compare.num_samples": 20,
                           "sweep.truth.t": [1.0, 1.5707963267948966]},
    "dslt4_pt2_smc.toml": {**SMC_TINY, "compare.num_warmup": 30, "compare.num_samples": 20, "sweep.truth.v": [1.0, 3.0]},
    "dslt4_free_energy.toml": {**SMC_TINY, "sweep.posterior.beta": [0.3, 3.0], "sweep.truth.t": [1.0, 1.5707963267948966]},
}


def test_every_shipped_config_has_tiny_settings():
    assert sorted(p.name for p in runner.shipped_configs()) == sorted(TINY)


@pytest.mark.parametrize("name", sorted(TINY))
def test_shipped_config_runs_tiny(tmp_path, name):
    out = runner.run_config(ROOT / "experiments" / name, tmp_path / "res", progress=False, overrides=TINY[name])
    metrics = json.loads((out / "metrics.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 0 and manifest["versions"]["jax"] and manifest["jax_devices"]
    assert manifest["wall_time_s"] > 0 and manifest["overrides"] == json.loads(json.dumps(TINY[name]))
    pngs = list(out.glob("*.png"))
    assert pngs and all(p.stat().st_size > 10_000 for p in pngs)
    assert (out / "arrays.npz").exists()
    assert not list(tmp_path.glob(".res.*"))
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert manifest["tool"] == "slt_relu" and sorted(manifest["files"]) == written
    if metrics.get("draws", {}).get("saved"):              # the draws as ArviZ netCDF, listed in the manifest
        assert metrics["draws"]["files"] and set(metrics["draws"]["files"]) <= set(written)
    assert manifest["resolved"]["kind"] == manifest["kind"] and manifest["resolved"]["seed"] == 0
    same_as_reference(name, metrics)
    if name == "dslt3_degenerate_node.toml":
        assert metrics["loss_on_true_set_max"] < 1e-12
        assert metrics["fisher_along_true_set"]["rank"] == [1, 1, 1]
        # mass across the valley: ends / middle -> 1/2 + 1/sqrt(2) (see landscape._valley_mass)
        np.testing.assert_allclose(metrics["valley_mass_end_to_middle_ratio"], 0.5 + 0.5**0.5, rtol=1e-3)
    if name == "dslt3_scaling_valley.toml":
        assert metrics["fisher_along_true_set"]["rank"] == [1, 1, 1]
        assert metrics["fisher_along_true_set"]["generator_rank"] == [1, 1, 1]
    if name == "true_set_m_symmetric.toml":
        # hand counts in tests/test_phases.py
        assert [metrics["widths"][d]["num_phases"] for d in ("3", "4")] == [2, 8]
        for d in ("3", "4"):
            assert metrics["widths"][d]["max_K"] < 1e-26 and metrics["widths"][d]["all_classified_as_themselves"]
            for row in metrics["widths"][d]["representatives"]:
                assert row["symmetry_checks_passed"] == "1/1" and row["rank"] <= row["bound"]
        # a degenerate node q = w = b = 0 has zero gradients in all its n_in + 2 = 4 coordinates and a zero
        # generator: 4 excess null directions, 3 generators, rank 17 - 7 = 10
        rows = {r["label"]: r for r in metrics["widths"]["4"]["representatives"]}
        deg = rows["+ + + | 1 degenerate"]
        assert (deg["generator_rank"], deg["excess"], deg["rank"]) == (3, 4, 10)
        assert metrics["widths"]["3"]["representatives"][0]["rank"] == 10        # D - d = 13 - 3
    if name == "linear_regions_xor.toml":
        xor = metrics["xor"]
        assert (xor["regions_in_box_exact"], xor["regions_on_grid"], xor["regions_along_diagonal"]) == (3, 3, 3)
        assert xor["patterns_seen"] == ["00", "10", "11"] and xor["clusters"]["3"]["rms_error"] < 1e-12
        assert metrics["lines"]["mean_regions"][0] >= 1
    if name == "functional_dimension_depth_width.toml":
        assert metrics["all_at_or_below_bound"]
        cell = next(c for c in metrics["cells"] if c["depth"] == 2 and c["point_factor"] == 2.0)
        assert cell["bound"] == 3 * 4 + 4 - 3 and cell["fraction_at_bound"] == 1.0    # generic one hidden layer
    if name.startswith("dslt4"):
        axis = "v" if "pt2" in name else "t"
        a, b = metrics["crossover_phases"]
        grid = np.asarray(metrics["mass"][a])
        two_axes = name in ("dslt4_pt1_phase_diagram.toml", "dslt4_free_energy.toml", "dslt4_pt1_smc.toml")
        assert grid.shape == ((2, 2) if two_axes else (2,))
        total = sum(np.asarray(metrics["mass"][k]) for k in metrics["mass"])
        np.testing.assert_allclose(total, 1.0)                      # the rule's phases partition the draws
        assert f"crossover_{axis}" in metrics and f"crossover_{axis}_se" in metrics
        assert all(p["trials"] == 2 and len(p["mass_per_trial"][a]) == 2 for p in metrics["points"])
        if two_axes:                                    # points that differ in beta only share their data
            pts = metrics["points"]
            truth_loss = [np.subtract(p["mean_loss_per_trial"], p["excess_loss_per_trial"]) for p in pts]
            np.testing.assert_allclose(truth_loss[:2], truth_loss[2:], rtol=1e-6)      # beta outer, t inner
            assert not np.allclose(truth_loss[0], truth_loss[1])
        assert all(0.99 < sum(p["classify_phase"]["mass"].values()) < 1.01 for p in metrics["points"])
        if name.endswith("smc.toml") or "free_energy" in name:
            assert metrics["sampler"] == "smc"
            for p in metrics["points"]:                 # SMC: masses' Monte Carlo errors from the 2 runs per data set
                assert set(p["mass_mcse"]) == set(p["mass"]) and len(p["log_evidence_per_run"]) == 4
                assert np.isfinite(p["log_evidence"]) and p["free_energy"]["total"] == pytest.approx(-p["log_evidence"])
                assert p["diagnostics"]["final_lambda_min"] == 1.0
            if "compare" in metrics:
                assert metrics["compare"]["sampler"] == "nuts" and set(metrics["compare"]["mass"]) == set(metrics["mass"])
            if "free_energy" in name:
                slopes = metrics["lambda_from_free_energy"]
                assert len(slopes) == 2 and set(slopes[0]["lambda"]) == {"other", "degenerate", "non_degenerate"}
                assert (out / "free_energy_scaling.png").exists()
            assert (out / "free_energy.png").exists()
        if "diagram" in name:
            assert metrics["n_beta"] == pytest.approx([200 / np.log(200), 200.0])
        if two_axes:
            assert len(metrics["crossover_t"]) == 2 and (out / "phase_diagram.png").exists()
        for png in ("phase_mass.png", "effective_weights.png") + (() if "smc" in name or "free_energy" in name else ("traces.png",)):
            assert (out / png).exists()
        a_leads = metrics["lead"][f"{a}_leads_at"]
        assert metrics["lead"][f"{a}_ever_leads"] == bool(a_leads) and np.shape(metrics["lead"]["difference"]) == grid.shape
        n_points = grid.size * (2 if "compare" in metrics else 1)
        assert metrics["draws"]["saved"] and len(metrics["draws"]["files"]) == n_points
    if name.startswith("llc"):
        rows = metrics["cases"]
        assert {"name", "true_lambda", "estimate", "se", "method"} <= set(rows[0])
        assert all(np.isfinite(r["estimate"]) for r in rows)
        if name == "llc_known_values.toml":
            assert [r["true_lambda"] for r in rows if r["method"] == "sgld"] == [5.0, 0.5, 0.5, 0.25, 1 / 6]
            assert {r["method"] for r in rows} == {"sgld", "beta_sweep"}
            sweeps = {r["name"]: r["localization"] for r in rows if r["method"] == "beta_sweep"}
            assert sweeps["generic truth d = m = 3"] == 3.0 and sweeps["generic truth d = m = 3, global posterior"] == 0.0
            for r in rows:                           # every multi-chain row reports R-hat and nested R-hat
                if r["method"] == "beta_sweep":
                    assert len(r["rhat"]) == len(r["betas"]) == len(r["rhat_nested"])
                    assert all(v is not None and v >= 0.9 for v in r["rhat"] + r["rhat_nested"])
                    assert all(f"{r['name']} (beta_sweep): {w}" in metrics["warnings"] for w in r["warnings"])
            assert not any(r["method"] == "sgld" and "global" in r["name"] for r in rows)   # the case's methods
            assert (out / "calibration.png").exists() and (out / "beta_sweep.png").exists()
            assert np.asarray(metrics["calibration"]["estimate"]).shape == (2, 1)
        else:                                           # phases of W0: one row per representative
            labels = [r["name"] for r in rows]
            assert "PT1 t = pi/2, width 2: + | 1 degenerate" in labels and len(labels) == len(set(labels))
            assert sum(r["name"].startswith("PT2 v = 1, width 3") for r in rows) == 2
            assert sum(r["name"].startswith("PT2 v = 1, width 4") for r in rows) == 8
    if name == "fisher_rank_survey.toml":
        for row in metrics["points"]:
            if row["expected_excess"] is not None:
                assert row["excess"] == row["expected_excess"], row


REFERENCE = ROOT / "tests" / "reference"
VOLATILE = {"program_wall_s", "resumed_points", "resumed_wall_s", "programs", "program_ticks", "program_chains",
            "program_points"}
# The learning coefficient's chains changed by rounding when SGLD moved onto the shared sampler interface (its
# potential takes the data as an argument instead of a constant): estimates agree to 1e-12, and the rank-based
# split R-hat of 60-step tiny traces moves in its third digit.
RTOL = {"llc_known_values.toml": 1e-9, "llc_dslt4_phases.toml": 1e-9}
RANK_BASED = {"rhat"}


def same_as_reference(name, metrics):
    """metrics equal the reference (tests/reference/NAME.json: this config's tiny run before the experiment
    layer was rebuilt, commit 8be1f74) key by key: exactly, or to RTOL where the sampler's rounding changed."""
    path = REFERENCE / name.replace(".toml", ".json")
    if not path.exists():                                       # configs added since (tests/reference/README.md)
        return
    old = json.loads(path.read_text())
    rtol = RTOL.get(name, 0.0)
    diffs = []

    def walk(a, b, path, key=""):
        if isinstance(a, dict):
            if not isinstance(b, dict):
                diffs.append(f"{path}: {b!r} is not a table")
                return
            for k, v in a.items():
                if k not in VOLATILE:
                    walk(v, b.get(k, "<missing>"), f"{path}.{k}", k)
        elif key == "warnings" and isinstance(a, list) and isinstance(b, list):   # checks added since may warn more
            strip = lambda w: re.sub(r"R-hat [0-9.]+", "", w) if rtol else w
            missing = {strip(w) for w in a} - {strip(w) for w in b}
            if missing:
                diffs.append(f"{path}: earlier warnings missing: {sorted(missing)}")
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{path}[{i}]", key)
        elif isinstance(a, float) and isinstance(b, (int, float)) and rtol:
            tol = 1e-2 if key in RANK_BASED else rtol
            if abs(a - b) > tol * max(abs(a), abs(b)):
                diffs.append(f"{path}: {a} vs {b}")
        elif isinstance(a, str) and isinstance(b, str) and rtol and "R-hat" in a:
            if re.sub(r"R-hat [0-9.]+", "", a) != re.sub(r"R-hat [0-9.]+", "", b):
                diffs.append(f"{path}: {a!r} vs {b!r}")
        elif a != b:
            diffs.append(f"{path}: {a!r} vs {b!r}")

    walk(old, metrics, "")
    assert not diffs, f"{len(diffs)} differences from tests/reference, e.g. {diffs[:5]}"


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
    (GOOD + "[inputs]\ndistribution = \"uniform\"\nhalf_width = -1.0\n", "inputs.half_width: expected a number > 0, got -1.0"),
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
    (POSTERIOR + "[sweep]\ntruth.t = [1.0, \"x\"]\n", "sweep point truth.t = 'x': truth.t: expected a number, got 'x'"),
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
    res = subprocess.run([sys.executable, "-m", "slt_relu.cli", "run", str(path), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.strip() == (
        "slt-relu: config error: bogus: unknown key; expected one of description, dtype, inputs, kind, landscape, name, seed, "
        "sigma, truth")
    res = subprocess.run([sys.executable, "-m", "slt_relu.cli", "list"], capture_output=True, text=True)
    assert res.returncode == 0 and "dslt3_degenerate_node " in res.stdout and "landscape" in res.stdout


def test_interrupted_run_leaves_nothing_and_rerun_replaces(tmp_path, monkeypatch):
    path = write(tmp_path, GOOD)
    out = tmp_path / "out"
    first = runner.run_config(path, out, progress=False)
    stamp = json.loads((first / "manifest.json").read_text())["finished_utc"]
    from slt_relu.kinds import landscape

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(landscape, "run", boom)
    with pytest.raises(KeyboardInterrupt):
        runner.run_config(path, tmp_path / "other", progress=False)
    assert not (tmp_path / "other").exists() and not list(tmp_path.glob(".other*"))
    monkeypatch.undo()
    runner.run_config(path, out, progress=False, overrides={"landscape.resolution": 11})
    assert np.load(out / "arrays.npz")["loss"].shape == (11, 11)
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
    Z = np.load(out / "arrays.npz")["loss"]
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


def test_interrupted_sweep_resumes_without_redoing_finished_points(tmp_path, monkeypatch, capsys):
    """Points run one program each; the second program is interrupted: no results folder, the first
    point's checkpoint stays; the rerun says so, reuses it and matches an uninterrupted run exactly."""
    from slt_relu.kinds import posterior_kind

    cfg = ROOT / "experiments" / "dslt4_pt1_node_degeneracy.toml"
    over = {**TINY["dslt4_pt1_node_degeneracy.toml"], "posterior.points_per_program": 1}
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
    assert sorted(p.name for p in (tmp_path / ".res.checkpoints").iterdir()) == ["point-00000.json",
                                                                                 "point-00000.npz"]
    calls.clear()
    capsys.readouterr()
    out = runner.run_config(cfg, tmp_path / "res", progress=False, overrides=over)
    assert calls == [[1]]                                        # only the unfinished point ran
    assert "resuming: 1 of 2 sweep points done" in capsys.readouterr().err
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (clean, out))
    assert b["resumed_points"] == [0] and a["resumed_points"] == []
    assert a["mass"] == b["mass"] and a["points"][0]["mean_loss_per_trial"] == b["points"][0]["mean_loss_per_trial"]
    assert not (tmp_path / ".res.checkpoints").exists()        # removed once the results are in place
    # a changed config does not reuse stale checkpoints
    monkeypatch.setattr(posterior_kind, "_run_program", flaky)
    calls.clear()
    with pytest.raises(KeyboardInterrupt):
        runner.run_config(cfg, tmp_path / "res2", progress=False, overrides=over)
    calls.clear()

    def recording(points, key):
        calls.append([p.index for p in points])
        return real(points, key)

    monkeypatch.setattr(posterior_kind, "_run_program", recording)
    runner.run_config(cfg, tmp_path / "res2", progress=False, overrides={**over, "posterior.n": 201})
    assert calls == [[0], [1]]


def test_learning_coefficient_cases_resume(tmp_path, monkeypatch, capsys):
    """Each case of a learning_coefficient config is a checkpointed point: an interrupted run
    resumes at the first unfinished case."""
    from slt_relu.kinds import llc_kind

    cfg = ROOT / "experiments" / "llc_dslt4_phases.toml"
    over = {**LLC_TINY, "llc.sgld.num_steps": 30}
    real = llc_kind._case
    calls = []

    def flaky(c, *args):
        calls.append(c["index"])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(c, *args)

    monkeypatch.setattr(llc_kind, "_case", flaky)
    with pytest.raises(KeyboardInterrupt):
        runner.run_config(cfg, tmp_path / "res", progress=False, overrides=over)
    calls.clear()
    capsys.readouterr()
    monkeypatch.setattr(llc_kind, "_case", lambda c, *args: calls.append(c["index"]) or real(c, *args))
    out = runner.run_config(cfg, tmp_path / "res", progress=False, overrides=over)
    assert calls == [1, 2] and "resuming: 1 of 3 cases done" in capsys.readouterr().err
    assert json.loads((out / "metrics.json").read_text())["resumed_cases"] == [0]


def test_settings_tables_in_readme_are_the_schemas():
    """README's settings section is generated from the schemas (`slt-relu settings --markdown`)."""
    from slt_relu.kinds import KINDS, settings_markdown

    readme = (ROOT / "README.md").read_text()
    begin, end = "<!-- settings: begin (slt-relu settings --markdown) -->\n", "\n<!-- settings: end -->"
    assert begin in readme and end in readme
    assert readme.split(begin)[1].split(end)[0] == settings_markdown(sorted(KINDS))


def test_kept_checkpoints_are_reanalysed_without_sampling(tmp_path, monkeypatch, capsys):
    """--keep-checkpoints: the draws stay, and a rerun with another phase rule analyses them again
    (a point's fingerprint covers what determines its draws, not the analysis)."""
    from slt_relu.kinds import posterior_kind

    cfg = ROOT / "experiments" / "dslt4_pt1_node_degeneracy.toml"
    over = TINY["dslt4_pt1_node_degeneracy.toml"]
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
    sets = [f"{k}={json.dumps(v)}" for k, v in {**TINY["dslt4_pt1_node_degeneracy.toml"],
                                                 "posterior.chains_per_dataset": 2}.items()]
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


def test_a_rerun_loads_its_programs_from_the_persistent_cache(tmp_path):
    """slt-relu run with --cache-dir: the first run writes its compiled programs there, a rerun finds every one
    of them (no new entry) and gives the same metrics.  In fresh processes, so the cache stays out of this one."""
    import subprocess
    import sys

    cache = tmp_path / "cache"
    sets = sum((["--set", f"{k}={json.dumps(v)}"] for k, v in TINY["dslt3_degenerate_node.toml"].items()), [])

    def run(out):
        subprocess.run([sys.executable, "-m", "slt_relu.cli", "run", "dslt3_degenerate_node", "--out", str(out),
                        "--no-progress", "--cache-dir", str(cache)] + sets, check=True, capture_output=True)
        return {p.name for p in cache.rglob("*") if p.is_file()}

    first = run(tmp_path / "a")
    assert len(first) >= 3, first                           # every program of the run, no minimum compile time
    assert run(tmp_path / "b") == first
    drop = lambda m: {k: v for k, v in m.items() if k not in VOLATILE}
    metrics = [json.loads((tmp_path / d / "metrics.json").read_text()) for d in "ab"]
    assert drop(metrics[0]) == drop(metrics[1])
