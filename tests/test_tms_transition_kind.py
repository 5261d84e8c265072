"""The tms_transition kind: the c = 5 config runs at its tiny size and its numbers are those of
slt_relu.tms.transition.bayesian_transition called directly with the same key (the kind adds the checks, the
metrics and the figure, nothing to the measurement); the formula's n come from the exact k-gon losses and the
first-principles lambdas; the headline reads the metrics (these three: check_the_tiny_run, which test_reference.py
calls on the tiny run it compares with the reference); bad settings are refused in one line before anything
runs."""
import json
import math
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from slt_relu.netcdf import read_tree
from slt_relu.workflow.settings import ConfigError
from slt_relu.workflow import report, runner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny import TINY  # noqa: E402

TINY_C5 = TINY["tms_transition_c5.toml"]


def check_the_tiny_run(out):
    """Checks of the tiny run OUT (tests/tiny.py), made by test_reference.py's
    test_shipped_config_runs_tiny[tms_transition_c5.toml] on the run it compares with the reference: one test, so that
    the run is paid once (as a test of its own here it was paid again whenever pytest-xdist gave the two
    tests different workers)."""
    from slt_relu.sampling import SMCSettings
    from slt_relu.tms import transition as T

    m = json.loads((out / "metrics.json").read_text())
    t = m["transition"]
    assert t["c"] == 5 and t["phases"] == ["5-gon", "4-gon"]
    # the formula from the exact losses (5-gon 0.0158256, 4-gon "-" 1/15) and lambdas (7, 6.5): n = 34.95; the
    # 4-gon "+" (a numerical minimum) has no first-principles lambda, so the group is its "-" variant
    assert t["n_formula"] == pytest.approx(34.9518, rel=1e-4)
    assert t["n_formula_by_variant"] == {"4-gon +": None, "4-gon -": pytest.approx(t["n_formula"], rel=1e-9)}
    assert list(m["comparisons"]) == ["5-gon vs 4-gon", "5-gon vs 4-gon +", "5-gon vs 4-gon -"]
    f = m["formula"]
    assert (f["a"], f["lambda_a"], list(f["variants"]), f["dominant"]) == ("5-gon", 7.0, ["4-gon -"], "4-gon -")
    assert f["loss_a"] == pytest.approx(0.0158256, rel=1e-5) and f["variants"]["4-gon -"]["lambda"] == 6.5
    assert [p["n"] for p in m["masses"]] == [20, 40]
    for p in m["masses"]:
        assert sum(p["mass"].values()) == pytest.approx(1.0, rel=1e-12)
        assert set(p["mass"]) == {"5-gon", "4-gon", "3-gon", "2-gon", "1-gon", "0-gon", "none"}
        assert set(p["mass_mcse"]) == set(p["mass"]) and math.isfinite(p["log_evidence"])
    chk = m["check"]                             # at the crossover, else the formula's n: 40 is nearer 35 in log n
    assert chk["datasets"] == 1 and chk["particles"] == 128 and chk["moves"] == 4 and chk["n"] in (20, 40)
    assert set(chk["phases"]) == {"5-gon", "4-gon", "none"} and chk["max_abs_z"] >= 0
    assert set(m["labelling_sensitivity"]) == {"angle_tol 0.5", "angle_tol 0.125",
                                               "dead columns by length (phases.label alone)"}
    ds = read_tree(out / "results.nc").to_dataset()
    assert ds.run_mass.dims == ("n", "dataset", "run", "variant") and ds.sizes["check_dataset"] == 1
    assert "particles" not in ds and list(ds.comparison.values) == list(m["comparisons"])
    assert {p.name for p in out.glob("*.png")} == {"transition.png"}
    # the measurement is bayesian_transition's, number for number (same machine, same program)
    s = runner.prepare("tms_transition_c5", TINY_C5).settings
    smc = s.smc.build()                                  # the [smc] table as the library's settings
    direct = T.bayesian_transition(jax.random.PRNGKey(0), 5, [20, 40], datasets=2, runs=2, settings=smc,
                                   pairs=[("5-gon", "4-gon"), ("5-gon", "4-gon +"), ("5-gon", "4-gon -")], n_boot=50)
    assert isinstance(smc, SMCSettings) and smc.num_particles == 64
    for v in ("run_mass", "log_evidence", "n_crossover", "n_formula", "log_mass_ratio"):
        np.testing.assert_array_equal(ds[v].values, direct[v].values)
    lines = report.headline("tms_transition", m)
    assert lines[0].startswith("c = 5: the 5-gon ") and "the asymptotic formula: 35 (the 4-gon group" in lines[0]
    assert lines[-1].startswith(f"check at n = {chk['n']} with 128 particles and 4 moves per stage (1 data sets)")


def test_the_headline_without_a_crossover():
    metrics = {"transition": {"c": 6, "phases": ["6-gon", "5-gon"], "n_crossover": None, "n_crossover_se": None,
                              "n_formula": 445.24, "n_formula_variant": "the 5-gon group"},
               "comparisons": {"6-gon vs 5-gon": {"n_crossover": None, "n_crossover_se": None, "n_formula": 445.24},
                               "6-gon vs 5-gon -": {"n_crossover": 430.2, "n_crossover_se": 47.0, "n_formula": 445.1}},
               "masses": [{"n": 20}, {"n": 40}], "check": None}
    assert report.headline("tms_transition", metrics) == [
        "c = 6: the 6-gon does not take the lead from the 5-gon within n = 20 .. 40; the asymptotic formula: 445 "
        "(the 5-gon group)",
        "6-gon vs 5-gon -: n = 430 +- 47; formula 445"]


def test_the_free_energy_panel_is_read_back_from_results_nc(tmp_path):
    """The figure's third panel from results.nc as written (the tiny runs fit no phase): per fitted phase G's mean
    and se over data sets at the n of its fit only, lambda and C (None where the fit has none)."""
    import xarray as xr

    from slt_relu.kinds.tms_transition_kind import free_energy_panel
    from slt_relu.netcdf import write_tree
    from slt_relu.tms.transition_checks import free_energy_dataset

    ds = xr.Dataset({"log_z_mean": (("n", "dataset"), np.zeros((3, 2)))}, coords={"n": [20, 40, 80]})
    curves = {"5-gon": {"n": np.array([40, 80]), "G": np.array([[10.0, 12.0], [14.0, np.nan]]), "lambda": 7.0},
              "4-gon +": {"n": np.array([20, 40, 80]), "G": np.ones((3, 2)), "lambda": None}, "_prediction": None}
    fits = {"5-gon": {"lambda": 7.0, "C": -1.5}, "4-gon +": {"lambda": None, "C": None},
            "n_formula_with_constants": {"a": "5-gon", "b": "4-gon -", "n": 35.0, "C_a_minus_C_b": 0.5}}
    write_tree(ds.merge(free_energy_dataset(ds, curves, fits)), tmp_path / "results.nc")
    panel = free_energy_panel(read_tree(tmp_path / "results.nc").to_dataset())
    assert list(panel) == ["5-gon", "4-gon +"]
    np.testing.assert_array_equal(panel["5-gon"]["n"], [40, 80])
    np.testing.assert_array_equal(panel["5-gon"]["G"], [11.0, 14.0])
    np.testing.assert_array_equal(panel["5-gon"]["G_se"], [1.0, np.nan])
    assert (panel["5-gon"]["lambda"], panel["5-gon"]["C"]) == (7.0, -1.5)
    assert panel["4-gon +"]["lambda"] is None and panel["4-gon +"]["C"] is None
    np.testing.assert_array_equal(panel["4-gon +"]["n"], [20, 40, 80])


@pytest.mark.parametrize("config, overrides, match", [
    ("tms_transition", {"transition.ns": [50, 40, 100]},
     r"^transition\.ns: expected increasing sample sizes, got \[50, 40, 100\]$"),
    ("tms_transition", {"transition.ns": [50, 50]}, r"^transition\.ns: expected increasing sample sizes"),
    ("tms_transition", {"transition.ns": [50]}, r"^transition\.ns: "),
    ("tms_transition_c5", {"transition.phases": ["6-gon", "5-gon"]},
     r"^transition\.phases: expected two k-gon groups of c = 5 \(5-gon, 4-gon, 3-gon, 2-gon, 1-gon, 0-gon\), the "
     r"first with the larger k, got \['6-gon', '5-gon'\]$"),
    ("tms_transition", {"transition.phases": ["5-gon", "6-gon"]}, r"^transition\.phases: expected two k-gon groups"),
    ("tms_transition", {"transition.phases": ["6-gon", "5-gon -"]}, r"^transition\.phases: expected two k-gon"),
    ("tms_transition", {"transition.phases": ["6-gon"]}, r"^transition\.phases: "),
    ("tms_transition", {"transition.c": 11}, r"^transition\.c: expected an integer in \[2, 10\], got 11$"),
    ("tms_transition", {"transition.runs": 1}, r"^transition\.runs: "),
    ("tms_transition", {"transition.phase": ["6-gon", "5-gon"]}, r"^transition\.phase: "),
    ("tms_transition", {"dtype": "float32"}, r"^dtype: expected 'float64' for kind 'tms_transition'"),
    ("tms_transition", {"smc.waste_free": True, "smc.num_particles": 60, "smc.particle_batch": 60},
     r"^check\.factor: the check's SMC settings \(2 x the particles and moves\) are invalid: num_particles: "
     r"expected a multiple of num_mcmc_steps \+ 1 = 11"),
])
def test_bad_settings_are_refused_in_one_line(tmp_path, config, overrides, match):
    with pytest.raises(ConfigError, match=match) as err:
        runner.run_config(config, tmp_path / "res", progress=False, overrides=overrides)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "res").exists()
    jax.config.update("jax_enable_x64", True)
