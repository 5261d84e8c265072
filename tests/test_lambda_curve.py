"""The lambda_curve kind: a config of losses with known learning coefficients runs through the runner, its
metrics carry the exact values of slt_relu.known_lambda beside each estimator's, its results.nc the estimates
and curves, and bad cases are refused in one line before anything runs."""
import json
import sys
from pathlib import Path

import pytest

from slt_relu.known_lambda import deep_linear, normal_crossing, reduced_rank
from slt_relu.netcdf import read_tree
from slt_relu.settings import ConfigError
from slt_relu.workflow import runner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny import TINY  # noqa: E402

OVERRIDES = {**TINY["known_lambda_suite.toml"], "cases": TINY["known_lambda_suite.toml"]["cases"][:2]}   # two compiles


def test_the_tiny_suite_runs_and_records_the_exact_values(tmp_path):
    out = runner.run_config("known_lambda_suite", tmp_path / "res", progress=False, overrides=OVERRIDES)
    metrics = json.loads((out / "metrics.json").read_text())
    exact = {"w1^2 w2^2": normal_crossing((1, 1)), "RRR 2-1-2": reduced_rank(2, 1, 2)}
    assert [c["name"] for c in metrics["cases"]] == list(exact)
    for case in metrics["cases"]:
        lam, m = exact[case["name"]]
        assert case["lambda_exact"] == pytest.approx(float(lam), rel=1e-15) and case["m_exact"] == m
        assert set(case["estimators"]) == {"free_energy", "tempered_loss", "thermodynamic"}
        for est in case["estimators"].values():
            assert est["lambda_se"] > 0 and est["m"] in (None, 1, 2, 3)
            assert set(est["lambda_by_m"]) == {"1", "2", "3"}
        assert case["t_range"] == pytest.approx([1e3, 1e5], rel=1e-6)
    ds = read_tree(out / "results.nc").to_dataset()
    assert dict(ds["lambda"].sizes) == {"case": 2, "estimator": 3}
    assert ds["t"].sizes["run"] == 2
    assert (out / "lambda_curve.png").stat().st_size > 0


def test_regular_cases_have_lambda_half_their_dimension():
    """A case's exact values come from slt_relu.known_lambda, its loss from the case's settings: the regular
    quadratic's Hessian is positive definite (its lambda d / 2 needs that)."""
    import numpy as np

    from slt_relu.kinds.lambda_curve_kind import Settings, resolve
    from slt_relu.settings import parse

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
