"""Every shipped config runs with tiny settings (tests/tiny.py) and reproduces its reference
(tests/reference/NAME.json, written by tests/write_references.py) on any machine: integers, labels and
strings exactly, deterministic floats to a relative tolerance from the dtype, sampler outputs within their
spread over independent runs (`slt_relu.workflow.compare`).  CI runs this file a second time under another
instruction set (`XLA_FLAGS=--xla_cpu_max_isa=...`, `.ci/run`)."""
import importlib
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from slt_relu.workflow import compare, replot, runner
from slt_relu.workflow.kind import kinds
from tiny import TINY, tiny_run

# a kind's own checks of its config's tiny run, made here on the run compared with the reference (one test: the
# run is paid once whichever pytest-xdist worker gets it)
KIND_CHECKS = {"tms_kgons.toml": "test_tms_kind", "tms_training.toml": "test_tms_training_kind",
               "tms_transition_c5.toml": "test_tms_transition_kind", "lambda_per_phase.toml": "test_lambda_curve",
               **{f"network_landscape_{n}.toml": "test_network_landscape" for n in ("truth", "digits", "tms")}}

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "tests" / "reference"
FALSE_ALARM = 1e-4          # the chance that any statistical comparison of the suite fails by chance alone


def reference(name: str) -> dict:
    return json.loads((REFERENCE / name.replace(".toml", ".json")).read_text())


@cache
def k_statistical() -> float:
    """k for |a - b| <= k sqrt(s_a^2 + s_b^2), s the spread over R runs: Student's t with R - 1 degrees of
    freedom (s is itself estimated from R runs) at a two-sided level of FALSE_ALARM / N, N the number of
    statistical numbers in all references (Bonferroni): every comparison of the suite together false-alarms
    with probability below FALSE_ALARM."""
    refs = [reference(name) for name in TINY]
    n = sum(len(r.get("spread", {})) for r in refs)
    runs = min(r["runs"] for r in refs if "runs" in r)
    return float(stats.t.ppf(1 - FALSE_ALARM / (2 * n), runs - 1))


def against_reference(name: str, metrics: dict) -> list[compare.Difference]:
    """The numbers of a tiny run of NAME outside their tolerance against tests/reference/NAME.json."""
    ref = reference(name)
    spread = ref.get("spread", {})
    se = lambda path: spread.get(compare.dotted(path))
    return compare.compare(ref["metrics"], metrics, kind=ref["kind"], dtype=ref["dtype"], k=k_statistical(),
                           se_reference=se, se_run=se)


def test_every_reference_was_written_for_todays_tiny_settings():
    """A reference holds the tiny settings it ran with: change tests/tiny.py and its reference must be rewritten."""
    for name in TINY:
        ref = reference(name)
        assert ref["overrides"] == json.loads(json.dumps(TINY[name])), f"{name}: rewrite its reference"
        assert (("spread" in ref) == (ref["kind"] in compare.SAMPLER_KINDS)) and ref.get("runs", 10) >= 10
        # a mass moves by whole draws on another machine: its spread is at least one draw's weight, never the
        # float rounding of masses that were equal in every run
        small = {p: v for p, v in ref.get("spread", {}).items() if ".mass" in f".{p}" and v < 1e-6}
        assert not small, f"{name}: mass spreads below one draw's weight: {small}"


@pytest.mark.skipif("xla_cpu_max_isa" not in os.environ.get("XLA_FLAGS", ""),
                    reason="only when CI reruns this file under a forced instruction set")
def test_the_forced_instruction_set_changes_the_last_bits(tmp_path):
    """The CI step that reruns this file under XLA_FLAGS=--xla_cpu_max_isa=... tests portability only if the flag
    changes XLA's floats: a tiny run without the flag (a fresh process, XLA_FLAGS less the instruction set) and with it
    differ in some float."""
    name = "dslt3_scaling_valley.toml"
    sets = sum((["--set", f"{k}={json.dumps(v)}"] for k, v in TINY[name].items()), [])
    env = dict(os.environ, XLA_FLAGS=" ".join(f for f in os.environ["XLA_FLAGS"].split() if "xla_cpu_max_isa" not in f))
    subprocess.run([sys.executable, "-m", "slt_relu.workflow.cli", "run", str(ROOT / "experiments" / name), "--out",
                    str(tmp_path / "native"), "--no-progress", "--no-cache"] + sets, check=True, capture_output=True,
                   env=env)
    forced = runner.run_config(ROOT / "experiments" / name, tmp_path / "forced", progress=False, overrides=TINY[name])
    a, b = (dict(compare.leaves(json.loads((d / "metrics.json").read_text()))) for d in (tmp_path / "native", forced))
    changed = [compare.dotted(p) for p, v in a.items() if isinstance(v, float) and v != b.get(p)]
    assert changed, "XLA_FLAGS changed no float of the tiny run: the CI step would test nothing"


def test_every_shipped_config_has_tiny_settings():
    assert sorted(p.name for p in runner.shipped_configs()) == sorted(TINY)


@pytest.mark.parametrize("name", sorted(TINY))
def test_shipped_config_runs_tiny(name, tmp_path):
    out = tiny_run(name)                              # shared with the kind's own tests of the same run
    metrics = json.loads((out / "metrics.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 0 and manifest["versions"]["jax"] and manifest["jax_devices"]
    assert manifest["wall_time_s"] > 0 and manifest["overrides"] == json.loads(json.dumps(TINY[name]))
    pngs = list(out.glob("*.png"))
    assert pngs and all(p.stat().st_size > 10_000 for p in pngs)
    # every figure from results.nc and the config alone (`slt-relu plot`): the same pictures, pixel for pixel
    assert kinds()[manifest["kind"]].figures is not None
    again = replot.redraw(out, tmp_path / "again")
    assert sorted(p.name for p in again) == sorted(p.name for p in pngs)
    assert all(p.read_bytes() == (out / p.name).read_bytes() for p in again)
    assert (out / "results.nc").exists() and not (out / "arrays.npz").exists()
    assert not list(out.parent.glob(".res.*"))
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert manifest["tool"] == "slt_relu" and sorted(manifest["files"]) == written
    if metrics.get("draws", {}).get("saved"):              # the draws as ArviZ netCDF, listed in the manifest
        assert metrics["draws"]["files"] and set(metrics["draws"]["files"]) <= set(written)
    assert manifest["resolved"]["kind"] == manifest["kind"] and manifest["resolved"]["seed"] == 0
    differences = against_reference(name, metrics)
    assert not differences, f"{len(differences)} numbers outside their tolerance, e.g. {[str(d) for d in differences[:5]]}"
    if name in KIND_CHECKS:
        importlib.import_module(KIND_CHECKS[name]).check_the_tiny_run(out)
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
            runs = TINY[name].get("posterior.chains_per_dataset", 1)
            for p in metrics["points"]:                 # SMC: masses' Monte Carlo errors from the runs per data set
                assert set(p["mass_mcse"]) == set(p["mass"]) and len(p["log_evidence_per_run"]) == 2 * runs
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




def test_check_reruns_a_results_folder_and_names_what_moved(tmp_path, capsys):
    """`slt-relu check FOLDER` reruns the config its manifest records and lists the numbers outside their
    tolerance: none for an untouched folder (here bitwise equal too: same machine, code and flags), and a
    deterministic float moved beyond its tolerance by name, with exit status 1."""
    from slt_relu.workflow import cli

    name = "dslt3_degenerate_node.toml"
    folder = runner.run_config(ROOT / "experiments" / name, tmp_path / "res", progress=False, overrides=TINY[name])
    assert cli.main(["check", str(folder), "--no-progress", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "bitwise equality expected" in out and "(no sampler outputs), 0 not bitwise equal, 0 outside their tolerance" in out, out
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["valley_mass_end_to_middle_ratio"][0] *= 1 + 1e-6               # float64: rtol 1e-9
    (folder / "metrics.json").write_text(json.dumps(metrics))
    assert cli.main(["check", str(folder), "--no-progress", "--no-cache"]) == 1
    out = capsys.readouterr().out
    assert "1 not bitwise equal, 1 outside their tolerance" in out and "  valley_mass_end_to_middle_ratio[0]: " in out
