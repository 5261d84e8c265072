"""The lambda_curve kind: a config of losses with known learning coefficients runs through the runner, its
metrics carry the exact values of slt_relu.known_lambda beside each estimator's, its results.nc the estimates
and curves, and bad cases are refused in one line before anything runs; the dslt_phase family (a phase of W0's
local potential, slt_relu.known_lambda.phase) against known_lambda.two_layer_phase's counts."""
import json
import sys
from pathlib import Path

import pytest

from slt_relu.known_lambda import deep_linear, normal_crossing, reduced_rank, two_layer_phase
from slt_relu.netcdf import read_tree
from slt_relu.workflow.settings import ConfigError
from slt_relu.workflow import runner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny import TINY  # noqa: E402

# two compiles of each sampler; NUTS's and SGLD's estimands at 6 t (the fewest the rule takes), 2 chains of 50 + 50 draws, 150 + 50 steps (the
# tiny reference runs without them)
OVERRIDES = {**{k: v for k, v in TINY["known_lambda_suite.toml"].items() if k not in ("mcmc", "sgld")},
             "cases": TINY["known_lambda_suite.toml"]["cases"][:2],
             "mcmc.temperatures": 6, "mcmc.chains": 2, "mcmc.num_warmup": 50, "mcmc.num_samples": 50,
             "sgld.temperatures": 6, "sgld.chains": 2, "sgld.num_steps": 200, "sgld.num_burnin": 50, "sgld.thin": 5,
             "sgld.pilot_steps": 50, "mcmc.t_max": 1e4, "mcmc.decades": 1.5, "sgld.t_max": 1e4, "sgld.decades": 1.0}


def test_the_tiny_suite_runs_and_records_the_exact_values(tmp_path):
    out = runner.run_config("known_lambda_suite", tmp_path / "res", progress=False, overrides=OVERRIDES)
    metrics = json.loads((out / "metrics.json").read_text())
    exact = {"w1^2 w2^2": normal_crossing((1, 1)), "RRR 2-1-2": reduced_rank(2, 1, 2)}
    assert [c["name"] for c in metrics["cases"]] == list(exact)
    for case in metrics["cases"]:
        lam, m = exact[case["name"]]
        assert case["lambda_exact"] == pytest.approx(float(lam), rel=1e-15) and case["m_exact"] == m
        # smc.symmetry_moves (the suite's): the GL(1) moves on reduced rank only; both have an exact free energy
        assert case["symmetry_moves"] is (case["name"] == "RRR 2-1-2")
        assert set(case["exact_check"]) == {"max_abs_z", "bound", "max_abs_residual"}
        assert set(case["estimators"]) == {"free_energy", "tempered_loss", "thermodynamic", "nuts_tempered_loss",
                                           "sgld_tempered_loss"}
        assert case["estimators"]["nuts_tempered_loss"]["grad_evals"] > 0
        sgld = case["estimators"]["sgld_tempered_loss"]           # pilots: 17 steps on the ladder x 2 chains at 6 t
        assert sgld["grad_evals"] == 6 * 17 * 2 * 51 + 6 * 2 * 201 and len(sgld["step_scale"]) == 6
        assert 0 <= sgld["accept_prob_min"] <= 1
        for est in case["estimators"].values():
            assert est["lambda_se"] > 0 and est["m"] in (None, 1, 2, 3)
            assert set(est["lambda_by_m"]) == {"1", "2", "3"}
        assert case["t_range"] == pytest.approx([1e3, 1e5], rel=1e-6)
        for name, window in (("free_energy", [1e3, 1e5]), ("nuts_tempered_loss", [10 ** 2.5, 1e4]),  # their own
                             ("sgld_tempered_loss", [1e3, 1e4])):
            assert case["estimators"][name]["t_range"] == pytest.approx(window, rel=1e-9)
    ds = read_tree(out / "results.nc").to_dataset()
    assert dict(ds["lambda"].sizes) == {"case": 2, "estimator": 5}
    assert ds["t"].sizes["run"] == 2
    assert (out / "lambda_curve.png").stat().st_size > 0


def test_regular_cases_have_lambda_half_their_dimension():
    """A case's exact values come from slt_relu.known_lambda, its loss from the case's settings: the regular
    quadratic's Hessian is positive definite (its lambda d / 2 needs that)."""
    import numpy as np

    from slt_relu.kinds.lambda_curve_kind import Settings, resolve
    from slt_relu.workflow.settings import parse

    s = parse(Settings, {"kind": "lambda_curve", "smc": {"name": "smc"}, "cases": [
        {"name": "r", "family": "regular", "num_params": 5},
        {"name": "dln", "family": "deep_linear", "input_dim": 3, "widths": [2, 3, 2], "true_rank": 1}]})
    r = resolve(s)
    H = np.asarray(r.cases[0].loss.hessian)
    assert np.allclose(H, H.T) and np.linalg.eigvalsh(H).min() >= 1 - 1e-12
    assert (r.cases[0].lambda_exact, r.cases[0].m_exact) == (2.5, 1)
    lam, m = deep_linear(3, (2, 3, 2), 1)
    assert (r.cases[1].lambda_exact, r.cases[1].m_exact, r.cases[1].num_params) == (float(lam), m, 6 + 6 + 6)
    target = np.asarray(r.cases[1].loss.target)
    assert target.shape == (2, 3) and np.linalg.matrix_rank(target) == 1
    w = np.zeros(18)
    assert float(r.cases[1].loss(w, None)) == pytest.approx(0.5 * np.sum(target ** 2), rel=1e-12)


@pytest.mark.parametrize("case, match", [
    ({"name": "a", "family": "normal_crossing"}, r"cases\[0\]\.k: expected a value for family 'normal_crossing'"),
    ({"name": "a", "family": "sum", "k": [0, 1]}, r"cases\[0\]\.k: expected a non-empty sequence of integers >= 1"),
    ({"name": "a", "family": "reduced_rank", "input_dim": 2, "hidden": 1}, r"cases\[0\]\.output_dim: expected"),
    ({"name": "a", "family": "reduced_rank", "input_dim": 2, "hidden": 1, "output_dim": 2, "true_rank": 2},
     r"cases\[0\]\.true_rank: expected at most"),
    ({"name": "a", "family": "deep_linear", "input_dim": 64, "widths": [64, 64]}, r"cases\[0\]: expected at most 2000"),
    ({"name": "a", "family": "regular", "num_params": 2, "n": 1000}, r"curve\.t_max: expected at most n = 1000"),
    ({"name": "a", "family": "regular", "num_params": 2, "n": 1000, "t_max": 2e3},
     r"cases\[0\]\.t_max: expected at most n = 1000 for the data case cases\[0\]"),
    ({"name": "a", "family": "regular", "num_params": 2, "n": 1000, "t_max": 1e3},
     r"curve\.decades: expected a window above t = 1, below log10\(t_max\) = 3 decades for cases\[0\], got 13"),
    ({"name": "a", "family": "regular", "num_params": 2, "n": 10 ** 7, "t_max": 1e5},
     r"cases\[0\]\.n: expected an integer in \[2, 1000000\], got 10000000"),
    ({**{"name": "a", "family": "dslt_phase", "truth": "dslt4_pt1", "width": 2, "phase": "++", "radius": 0.75},
      "n": 1000, "t_max": 1e3}, r"cases\[0\]\.n: only for the families"),
    ({"name": "a", "family": "regular", "num_params": 2, "t_max": 1e26}, r"cases\[0\]\.t_max: expected .*1e\+25"),
])
def test_bad_cases_are_refused_in_one_line(tmp_path, case, match):
    with pytest.raises(ConfigError, match=match):
        runner.run_config("known_lambda_suite", tmp_path / "res", progress=False, overrides={"cases": [case]})
    assert not (tmp_path / "res").exists()


def test_duplicate_case_names_are_refused(tmp_path):
    case = {"name": "a", "family": "regular", "num_params": 2}
    with pytest.raises(ConfigError, match="cases: expected distinct names"):
        runner.run_config("known_lambda_suite", tmp_path / "res", progress=False, overrides={"cases": [case, case]})


def test_a_window_with_too_few_stages_is_a_config_error(tmp_path):
    """smc.target_ess = 0.3 leaves too few stages in the fitted window: one line naming the keys, no folder."""
    overrides = {**OVERRIDES, "cases": OVERRIDES["cases"][:1], "smc.target_ess": 0.3}
    with pytest.raises(ConfigError, match=r"cases\[0\] \(w1\^2 w2\^2\): curve: expected at least 6 stages.*smc.target_ess"):
        runner.run_config("known_lambda_suite", tmp_path / "res", progress=False, overrides=overrides)
    assert not (tmp_path / "res").exists()


def test_a_run_that_stops_short_of_t_max_is_a_config_error(tmp_path):
    """smc.max_stages = 4 stops every run long before t_max: one line naming the key and where it stopped, no folder
    (not a fit over a window that the runs never reached)."""
    overrides = {**OVERRIDES, "cases": OVERRIDES["cases"][:1], "smc.max_stages": 4}
    with pytest.raises(ConfigError, match=r"cases\[0\] \(w1\^2 w2\^2\): an SMC run stopped at t = .*, short of t_max = "
                       r".*smc\.max_stages = 4"):
        runner.run_config("known_lambda_suite", tmp_path / "res", progress=False, overrides=overrides)
    assert not (tmp_path / "res").exists()


def test_a_run_whose_particles_left_the_posterior_is_flagged():
    """t E_t[K] above D (lambda <= D / 2 for every loss of D parameters) at some stage: a warning naming the case, the
    value and its t; none where every stage stays below D (NaN past a run's last stage is ignored)."""
    from types import SimpleNamespace

    import numpy as np

    from slt_relu.kinds.lambda_curve_report import left_the_posterior

    t = np.array([[1e2, 1e4, 1e6], [1e2, 1e4, np.nan]])
    fine = SimpleNamespace(t=t, mean_loss=np.array([[1.9, 1.95, 1.99], [1.8, 1.9, np.nan]]) / t)
    assert left_the_posterior("a", fine, 4) == []
    broken = SimpleNamespace(t=t, mean_loss=np.array([[1.9, 1.95, 3e16], [1.8, 1.9, np.nan]]) / t)
    (line,) = left_the_posterior("a", broken, 4)
    assert line.startswith("a: a run of SMC reaches t E_t[K] = 3e+16 at t = 1e+06, above the 4 that no loss of 4 "
                           "parameters reaches")
    diverged = SimpleNamespace(t=t, mean_loss=np.array([[1.9, np.nan, 1.99], [1.8, 1.9, np.nan]]) / t)
    (line,) = left_the_posterior("a", diverged, 4, "Gibbs")
    assert line.startswith("a: a run of Gibbs reaches t E_t[K] = nan at t = 1e+04") and line.endswith("(a smaller t_max)")


PHASE = {"name": "p", "family": "dslt_phase", "truth": "dslt4_pt1", "truth_options": {"t": 1.5707963267948966},
         "width": 2, "phase": "++", "radius": 0.75}


def check_the_tiny_run(out):
    """lambda_per_phase's tiny run OUT (PT1's degenerate phase, its own runs and t_max overriding [curve]'s): the
    exact value is known_lambda.two_layer_phase's count, the region's report (Fisher rank, the pinned slot, the
    final particles' phases) and SGLD's reference are in the metrics.  Made by test_reference.py's
    test_shipped_config_runs_tiny[lambda_per_phase.toml] on the run it compares with the reference (one test: the
    run is paid once whichever pytest-xdist worker gets it)."""
    tiny = TINY["lambda_per_phase.toml"]
    metrics = json.loads((out / "metrics.json").read_text())
    (case,) = metrics["cases"]
    lam, m = two_layer_phase(2, 1, degenerate=1)
    assert (case["family"], case["lambda_exact"], case["m_exact"]) == ("dslt_phase", float(lam), m)
    assert case["num_params"] == 2 * 4 + 1 - 1                       # D = d (n_in + 2) + 1, one weight pinned
    assert case["t_range"] == pytest.approx([1e2, 1e4], rel=1e-6)    # the case's t_max = 1e4, curve.decades = 2
    phase = case["phase"]
    assert (phase["label"], phase["kind"], phase["fisher_rank"], phase["pinned"]) == (
        "+ | 1 degenerate", "degenerate", 4, ["w[0,1]"])
    assert phase["prior_std"] == 0.25 and phase["radius"] == 0.75 and phase["loss_at_center"] < 1e-30
    assert 0.0 <= phase["final_phase_fraction"] <= 1.0
    assert sum(phase["final_phases"].values()) == pytest.approx(1.0, abs=1e-12)
    assert phase["final_phase_fraction"] == phase["final_phases"].get("+ | 1 degenerate", 0.0)
    assert case["reference"] == tiny["cases"][0]["reference"]
    for est in case["estimators"].values():
        assert est["lambda_se"] > 0 and set(est["lambda_se_by_m"]) == set(est["lambda_by_m"]) == {"1", "2"}
    ds = read_tree(out / "results.nc").to_dataset()
    assert ds["t"].sizes["run"] == 2                                 # the case's runs = 2, not curve.runs = 3
    assert float(ds["lambda_exact"][0]) == float(lam)
    assert (out / "lambda_curve.png").stat().st_size > 0


def test_the_phases_first_principles_values_and_their_potential():
    """Resolved without sampling: PT1's two phases of width 2 and PT2's true orientation carry
    known_lambda.two_layer_phase's counts (2, 8/3, 5); the sampler's coordinates are orthonormal (E^T E = I) with
    the pinned weights' rows zero; the potential is 0 at the representative, K(w_a + E z) - K(w_a) inside the ball
    (against population_loss of the parameters ``params`` builds) and the wall outside; a phase the count does
    not cover (three nodes on one boundary) has no exact value."""
    import jax
    import numpy as np

    from slt_relu import population_loss
    from slt_relu.kinds.lambda_curve_kind import Settings, resolve
    from slt_relu.known_lambda.phase import WALL
    from slt_relu.network import TwoLayer
    from slt_relu.workflow.settings import parse

    pt2 = {**PHASE, "truth": "dslt4_pt2", "truth_options": {"v": 1.0}, "width": 3, "phase": "+ + +"}
    cases = [{**PHASE, "name": "deg", "phase": "+ | 1 degenerate"}, {**PHASE, "name": "pair"}, {**pt2, "name": "pt2"},
             {**PHASE, "name": "three", "width": 3, "phase": "+++"}]
    with jax.enable_x64(True):
        r = resolve(parse(Settings, {"kind": "lambda_curve", "smc": {"name": "smc"}, "cases": cases}))
        counts = [two_layer_phase(2, 1, degenerate=1), two_layer_phase(2, 1, shared_pairs=1), two_layer_phase(2, 3)]
        for c, (lam, m), k in zip(r.cases, counts, (8, 7, 10)):
            assert (c.lambda_exact, c.m_exact, c.num_params) == (float(lam), m, k), c.settings.name
        assert (r.cases[3].lambda_exact, r.cases[3].m_exact) == (None, None)
        assert "not covered" in r.cases[3].phase["lambda_rule"]
        rng = np.random.default_rng(0)
        for c in r.cases[:3]:
            loss, E = c.loss, np.asarray(c.loss.embed)
            np.testing.assert_allclose(E.T @ E, np.eye(c.num_params), atol=1e-12)
            n_in = loss.inputs.n_in
            for slot in c.phase["pinned"]:
                i, j = map(int, slot[2:-1].split(","))
                assert not E[i * n_in + j].any()
            assert float(loss(np.zeros(c.num_params), None)) == 0.0
            z = rng.normal(size=c.num_params)
            inside, outside = 0.5 * z / np.linalg.norm(z), 0.8 * z / np.linalg.norm(z)   # radius 0.75
            p = loss.params(inside)
            truth = TwoLayer(*(np.asarray(a) for a in loss.truth))
            K = float(population_loss(p, truth, loss.inputs, loss.sigma))
            assert float(loss(inside, None)) == pytest.approx(K - loss.loss_star, rel=1e-12)
            assert K > 1e-4
            assert float(loss(outside, None)) == WALL


@pytest.mark.parametrize("case, match", [
    ({k: v for k, v in PHASE.items() if k != "truth"}, r"cases\[0\]\.truth: expected a value for family 'dslt_phase'"),
    ({k: v for k, v in PHASE.items() if k != "width"}, r"cases\[0\]\.width: expected a value for family 'dslt_phase'"),
    ({k: v for k, v in PHASE.items() if k != "phase"}, r"cases\[0\]\.phase: expected a value for family 'dslt_phase'"),
    ({k: v for k, v in PHASE.items() if k != "radius"}, r"cases\[0\]\.radius: expected a value for family"),
    ({"name": "a", "family": "regular", "num_params": 2, "width": 2},
     r"cases\[0\]\.width: only for family 'dslt_phase'"),
    ({"name": "a", "family": "regular", "num_params": 2, "truth_options": {"t": 1.0}},
     r"cases\[0\]\.truth_options: only for family 'dslt_phase'"),
    ({**PHASE, "phase": "+++"}, r"cases\[0\]\.phase: expected one of \['\+ \| 1 degenerate', '\+\+'\]"),
    ({**PHASE, "truth_options": {"v": 1.0}}, r"cases\[0\]\.truth_options\.v: unknown key"),
    ({**PHASE, "truth": "dslt3_example_3_1", "truth_options": {}},
     r"cases\[0\]\.width: expected an integer >= m = 4 \(the truth's nodes\), got 2"),
])
def test_bad_phase_cases_are_refused_in_one_line(tmp_path, case, match):
    with pytest.raises(ConfigError, match=match) as err:
        runner.run_config("lambda_per_phase", tmp_path / "res", progress=False, overrides={"cases": [case]})
    assert "\n" not in str(err.value)
    assert not (tmp_path / "res").exists()


def test_a_phase_case_in_float32_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"dtype: expected 'float64' for family 'dslt_phase'"):
        runner.run_config("lambda_per_phase", tmp_path / "res", progress=False,
                          overrides={"dtype": "float32", "cases": [PHASE]})
    assert not (tmp_path / "res").exists()


def test_the_headline_gives_lambda_at_the_exact_m_where_m_is_not_identified():
    """A row whose fit left m unidentified (reporting lambda for m = 2) also shows the fit at the exact m = 1 with
    its standard error; an identified m, a case without an exact value and the reference read as written."""
    from slt_relu.kinds.lambda_curve_kind import headline

    est = {"lambda": 1.9, "lambda_se": 0.05, "m": None, "lambda_by_m": {"1": 2.08, "2": 1.9},
           "lambda_se_by_m": {"1": 0.016, "2": 0.05}}
    rows = [{"name": "a", "lambda_exact": 2.0, "m_exact": 1, "estimators": {"free_energy": est},
             "reference": {"name": "SGLD", "estimate": 2.3, "se": 0.05}},
            {"name": "b", "lambda_exact": 2.0, "m_exact": 1, "estimators": {"free_energy": {**est, "m": 2}}},
            {"name": "c", "lambda_exact": None, "m_exact": None, "estimators": {"free_energy": est}}]
    lines = headline({"cases": rows, "warnings": ["w"]})
    assert lines == ["a: exact 2 (m 1); free_energy: 1.9 +- 0.05 m ? (at m 1: 2.08 +- 0.016); SGLD: 2.3 +- 0.05",
                     "b: exact 2 (m 1); free_energy: 1.9 +- 0.05 m 2",
                     "c: no exact value; free_energy: 1.9 +- 0.05 m ?", "warning: w"]


def test_nuts_and_smc_readings_of_the_estimand_are_compared():
    """The warning fires where the two samplers' lambda at a common m differ by more than 3 combined standard
    errors (here 0.05 against se hypot(0.01, 0.01) = 0.0141: 3.5), or where both identify different m; not
    where they agree within their errors (0.04: 2.8)."""
    from slt_relu.kinds.lambda_curve_report import estimand_disagreement as _estimand_disagreement

    def est(lam, m, se=0.01):
        return {"lambda": lam, "lambda_se": se, "m": m, "lambda_by_m": {"1": lam, "2": lam + 0.1},
                "lambda_se_by_m": {"1": se, "2": se}}

    assert _estimand_disagreement("a", {"tempered_loss": est(0.5, None), "nuts_tempered_loss": est(0.46, None)}) == []
    far = _estimand_disagreement("a", {"tempered_loss": est(0.5, 1), "nuts_tempered_loss": est(0.45, None)})
    assert len(far) == 1 and far[0].startswith("a: nuts_tempered_loss and SMC's tempered_loss differ by -0.05 at m = 1 (3.5")
    both = _estimand_disagreement("a", {"tempered_loss": est(0.5, 2), "nuts_tempered_loss": est(0.5, 1)})
    assert both == ["a: nuts_tempered_loss identifies m = 1, SMC's tempered_loss m = 2"]
    # over different windows the message names them: a window that is not asymptotic is the other explanation
    windows = _estimand_disagreement("a", {"tempered_loss": {**est(0.5, 1), "t_range": [1e3, 1e16]},
                                           "nuts_tempered_loss": {**est(0.45, None), "t_range": [1e3, 1e8]}})
    assert windows == ["a: nuts_tempered_loss and SMC's tempered_loss differ by -0.05 at m = 1 (over t = 1e+03 .. "
                       "1e+08 and 1e+03 .. 1e+16) (3.5 combined standard errors): one sampler misses part of the "
                       "posterior or a window is not asymptotic"]


def _family_loss(family, **keys):
    """A case's population loss and its data-case RegressionLoss with the regression that draws the data."""
    from slt_relu.kinds.lambda_curve_kind import Settings, resolve
    from slt_relu.workflow.settings import parse

    case = {"name": "c", "family": family, **keys}
    pop, data = (resolve(parse(Settings, {"kind": "lambda_curve", "smc": {"name": "smc"}, "cases": [c]})).cases[0]
                 for c in (case, {**case, "n": 100, "t_max": 100.0, "decades": 1.0}))
    return pop, data


FAMILY_KEYS = [("normal_crossing", {"k": [1, 2]}), ("sum", {"k": [2, 1, 3]}), ("regular", {"num_params": 3}),
               ("reduced_rank", {"input_dim": 3, "hidden": 2, "output_dim": 2, "true_rank": 1}),
               ("deep_linear", {"input_dim": 2, "widths": [3, 2, 3], "true_rank": 1})]


@pytest.mark.parametrize("family, keys", FAMILY_KEYS)
def test_the_data_loss_is_the_data_sets_mean_loss_and_its_population_limit_half_k(family, keys):
    """RegressionLoss from the statistics (S, G) of a data set drawn here equals (1 / 2n) sum_i (|y_i - P(w) x_i|^2
    - |y_i - P0 x_i|^2) summed over the samples (relative 1e-10: float64 sums of 37 terms of size 1), and with
    S = Sigma, G = 0 it is the case's population K (half of it for the crossings and sums: the same lambda and m)."""
    import jax.numpy as jnp
    import numpy as np

    pop, data = _family_loss(family, **keys)
    P0, C = data.regression
    rng = np.random.default_rng(0)
    n, (b, a) = 37, P0.shape
    X = rng.normal(size=(n, a)) @ C.T
    E = rng.normal(size=(n, b))
    Y = X @ P0.T + E
    for _ in range(3):
        w = rng.normal(size=data.num_params)
        P = np.asarray(data.loss.prediction(jnp.asarray(w)))
        direct = 0.5 * np.mean(np.sum((Y - X @ P.T) ** 2, 1) - np.sum(E ** 2, 1))
        stats = (jnp.asarray(X.T @ X / n), jnp.asarray(E.T @ X / n), jnp.asarray(P0))
        assert float(data.loss(jnp.asarray(w), stats)) == pytest.approx(direct, rel=1e-10)
        population = (jnp.asarray(C @ C.T), jnp.zeros((b, a)), jnp.asarray(P0))
        half = 0.5 if family in ("normal_crossing", "sum") else 1.0       # the others' K already has the 1/2
        limit = float(data.loss(jnp.asarray(w), population))
        assert limit == pytest.approx(half * float(pop.loss(jnp.asarray(w), None)), rel=1e-12)


def test_regression_statistics_count_n_samples_across_chunks(monkeypatch):
    """Each run's statistics hold exactly n samples: with chunks of 2, n = 3 inputs in 5 dimensions fill two chunks
    (4 rows) and give S of rank 3 (rank 4 if the last chunk's excess row were kept); over two chunks and a remainder
    (n = 2 CHUNK + 3) S is near Sigma = C C^T within 6 of its standard errors sqrt((Sigma_ii Sigma_jj + Sigma_ij^2) / n)
    and G near 0 within 6 sqrt(Sigma_jj / n); runs draw different data sets."""
    import jax
    import numpy as np

    from slt_relu.known_lambda import losses
    from slt_relu.known_lambda.losses import CHUNK, regression_statistics

    with monkeypatch.context() as patch:
        patch.setattr(losses, "CHUNK", 2)
        S, G, P0 = regression_statistics(jax.random.key(0), np.zeros((2, 5)), np.eye(5), 3, 2)
    assert S.shape == (2, 5, 5) and G.shape == (2, 2, 5) and P0.shape == (2, 2, 5)
    assert [np.linalg.matrix_rank(np.asarray(s)) for s in S] == [3, 3]
    C = np.array([[1.0, 0.0], [0.6, 0.8]])
    n = 2 * CHUNK + 3
    S, G, _ = regression_statistics(jax.random.key(1), np.ones((1, 2)), C, n, 3)
    Sigma = C @ C.T
    se = np.sqrt((np.outer(np.diag(Sigma), np.diag(Sigma)) + Sigma ** 2) / n)
    assert np.all(np.abs(np.asarray(S) - Sigma) < 6 * se)
    assert np.all(np.abs(np.asarray(G)) < 6 * np.sqrt(np.diag(Sigma) / n))
    assert not np.allclose(S[0], S[1])
    with pytest.raises(ValueError, match="n: expected a positive integer, got 0"):
        regression_statistics(jax.random.key(1), np.ones((1, 2)), C, 0, 3)
    with pytest.raises(ValueError, match=r"truth, cov_factor: expected shapes \(b, a\) and \(a, a\)"):
        regression_statistics(jax.random.key(1), np.ones((1, 3)), C, 10, 3)


def test_smc_free_energy_of_a_regular_data_case_matches_its_closed_form():
    """A regular data case, K_n(w) = w^T S w / 2 - g^T w, has a closed-form free energy under the prior N(0, s^2 I)
    (``exact_free_energy.gaussian_free_energy``), so each run's SMC free energy (its own data set, run_data) is checked
    against its own over t = 1 .. 1e3 (check_free_energy with one exact F per run): within 0.3 nats everywhere
    (2,048 particles: the runs' residuals measured 0.22 at most; the data term t^2 g^T A^(-1) g / 2 alone is 2.2-3.8
    nats at t = 1e3), and the runs' mean residual within 4 standard errors plus 0.05 nats (SMC's F carries an upward
    bias of about half the variance of log Z).  For the regular family the data's term is exactly t L* + O(1), so the
    fit with L* free (and c3 / t) reads each data set's own minimum and lambda = d / 2 at m = 1."""
    import functools

    import jax
    import numpy as np

    from slt_relu.known_lambda.losses import regression_statistics
    from slt_relu.posterior.exact_free_energy import check_free_energy, gaussian_free_energy
    from slt_relu.posterior.free_energy_curve import fit_learning_coefficient, smc_free_energy_curve
    from slt_relu.sampling import SMCSettings

    _, case = _family_loss("regular", num_params=3)
    runs, n, s = 4, 1000, 1.0
    stats = regression_statistics(jax.random.key(2), *case.regression, n, runs)
    settings = SMCSettings(num_particles=2048, num_mcmc_steps=7, waste_free=True, target_ess=0.9, max_stages=500)
    curve = smc_free_energy_curve(jax.random.key(3), case.loss, 3, 1e3, settings, num_runs=runs, prior_std=s,
                                  run_data=stats)
    S, g = np.asarray(stats[0]), np.asarray(stats[1])[:, 0, :]
    exact = [functools.partial(gaussian_free_energy, S[r], gradient=g[r], prior_std=s) for r in range(runs)]
    chk = check_free_energy(curve, exact, 1.0, 1e3)
    assert chk.exact.shape == (runs, len(chk.t))
    assert np.max(np.abs(chk.residual)) < 0.3, chk.residual
    assert np.all(np.abs(chk.mean) < 4 * chk.se + 0.05), (chk.mean, chk.se)
    # the fit with L* free reads each data set's own minimum, L*_r = -g_r^T S_r^(-1) g_r / 2 (about -chi^2_3 / 2n),
    # within 15 % (measured 0.8-5.4 %; a slope error of 0.05 at t = 1e3 moves L* by 5e-5 of its 1.5e-3), and
    # lambda = d / 2 within 10 % at m = 1
    fit = fit_learning_coefficient(curve, "tempered_loss", loss_min=None, decades=2.0)
    lstar = np.array([-0.5 * g[r] @ np.linalg.solve(S[r], g[r]) for r in range(runs)])
    assert np.allclose(fit.details.run_loss_min, lstar, rtol=0.15), (fit.details.run_loss_min, lstar)
    assert fit.details.lambda_by_m[1] == pytest.approx(1.5, rel=0.1)


def test_smc_free_energy_curve_refuses_mismatched_run_data():
    import jax
    import jax.numpy as jnp

    from slt_relu.posterior.free_energy_curve import smc_free_energy_curve
    from slt_relu.sampling import SMCSettings

    settings = SMCSettings(num_particles=16, num_mcmc_steps=3)
    loss = lambda w, d: jnp.sum(w ** 2)
    with pytest.raises(ValueError, match="run_data: expected leaves with a leading axis num_runs = 2"):
        smc_free_energy_curve(jax.random.key(0), loss, 2, 10.0, settings, num_runs=2, run_data=jnp.zeros((3, 1)))
    with pytest.raises(ValueError, match="data, run_data: expected at most one"):
        smc_free_energy_curve(jax.random.key(0), loss, 2, 10.0, settings, num_runs=2, data=jnp.zeros(1),
                              run_data=jnp.zeros((2, 1)))


GIBBS_TINY = TINY["known_lambda_large.toml"]


def test_gibbs_alone_reads_cases_past_smcs_bound_and_data_cases(tmp_path):
    """Without [smc] and [mcmc], the Gibbs sampler reads every case, one of them past SMC's 2,000 parameters, one from
    data sets (a chain per data set, each with its L*): the estimator gibbs_tempered_loss only, its sweeps counted,
    no gradients, and its runs are the curve that results.nc and the figure show."""
    out = runner.run_config("known_lambda_large", tmp_path / "res", progress=False, overrides=GIBBS_TINY)
    metrics = json.loads((out / "metrics.json").read_text())
    assert [c["num_params"] for c in metrics["cases"]] == [27, 32 * 32 * 2, 12]
    for case in metrics["cases"]:
        assert list(case["estimators"]) == ["gibbs_tempered_loss"] and case["curve"] == "gibbs_tempered_loss"
        est = case["estimators"]["gibbs_tempered_loss"]
        assert est["sweeps"] == 4 * 10 * (20 + 20) and case["grad_evals"] == 0
        assert est["lambda_se"] > 0 and len(est["run_loss_min"]) == 4
    assert metrics["cases"][0]["estimators"]["gibbs_tempered_loss"]["run_loss_min"] == [0.0] * 4
    assert metrics["cases"][2]["t_range"] == pytest.approx([1e2, 1e4], rel=1e-9)
    assert len(set(metrics["cases"][2]["estimators"]["gibbs_tempered_loss"]["run_loss_min"])) == 4  # own data sets
    ds = read_tree(out / "results.nc").to_dataset()
    assert list(ds["estimator"].values) == ["gibbs_tempered_loss"] and dict(ds["t"].sizes) == {"case": 3, "run": 4,
                                                                                             "stage": 10}
    assert list(ds["curve"].values) == ["gibbs_tempered_loss"] * 3


@pytest.mark.parametrize("overrides, match", [
    ({"smc": None, "mcmc": None, "sgld": None, "cases": [{"name": "a", "family": "normal_crossing", "k": [1, 1]}]},
     r"cases\[0\]: no estimator reads this normal_crossing case: expected \[smc\] \(every case\), \[mcmc\] or "
     r"\[sgld\] \(population"),
    ({"smc": None, "mcmc": None, "sgld": {}, "cases": [{"name": "a", "family": "regular", "num_params": 2, "n": 1000,
                                            "t_max": 1e3, "decades": 2.0}]},
     r"cases\[0\]: no estimator reads this regular case of data"),
    ({"smc": None, "cases": [PHASE]}, r"cases\[0\]: family 'dslt_phase' is read by SMC alone: expected an \[smc\]"),
    ({"cases": [{"name": "a", "family": "deep_linear", "input_dim": 32, "widths": [32, 32]}]},
     r"cases\[0\]: expected at most 2000 parameters \(SMC's, NUTS's and SGLD's bound; the Gibbs sampler alone, "
     r"without \[smc\], \[mcmc\] and \[sgld\], reads reduced_rank and deep_linear cases of up to 100000\), got 2048"),
    ({"sgld": {"num_steps": 100, "num_burnin": 100}}, r"sgld.num_burnin: expected an integer below num_steps = 100"),
    ({"mcmc.decades": 9.0}, r"mcmc\.decades: expected a window above t = 1, below log10\(t_max\) = 8 decades for "
     r"cases\[0\]'s mcmc reading, got 9"),
    ({"sgld.t_max": 1e2, "sgld.decades": None}, r"sgld\.t_max: expected above the lower end t = 1e\+03 of "
     r"cases\[0\]'s window, got 100"),
    ({"gibbs.t_max": None}, r"curve\.t_max: expected at most 1e\+14 for the Gibbs sampler's reading of cases\[11\]"),
    ({"sgld.t_max": 1e26}, r"sgld\.t_max: expected .*1e\+25"),
    ({"mcmc.temperatures": 5}, r"mcmc\.temperatures: expected at least 6 for cases\[0\] \(the tempered_loss rule fits "
     r"m up to curve\.max_multiplicity = 3 on each half of the window\), got 5"),
    ({"gibbs.temperatures": 9}, r"gibbs\.temperatures: expected at least 10 for cases\[16\] \(.*, with L\* fitted\), got 9"),
    ({"smc": None, "mcmc": None, "sgld": None, "gibbs": {},
      "cases": [{"name": "a", "family": "deep_linear", "input_dim": 256, "widths": [256, 256]}]},
     r"cases\[0\]: expected at most 100000 parameters \(the Gibbs sampler's bound\), got 131072"),
])
def test_cases_no_estimator_can_read_are_refused_in_one_line(tmp_path, overrides, match):
    with pytest.raises(ConfigError, match=match):
        runner.run_config("known_lambda_suite", tmp_path / "res", progress=False, overrides=overrides)
    assert not (tmp_path / "res").exists()
