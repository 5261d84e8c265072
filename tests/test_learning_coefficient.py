"""The learning coefficient's one curve type, one estimate type and one least-squares fitter
(slt_relu.posterior.learning_coefficient): weighted least squares against closed forms and hand counts, the curve's
per-run selection, and the estimate that the asymptotic fit returns."""
import math

import numpy as np
import pytest

import slt_relu as S
from slt_relu.posterior.free_energy_curve import AsymptoticFit, fit_learning_coefficient
from slt_relu.posterior.learning_coefficient import LeastSquares, TemperedCurve, weighted_least_squares


def test_weighted_least_squares_recovers_an_exact_line_and_counts_chi2_by_hand():
    """y = 2 + 3 x exactly: the coefficients to rounding (1e-12 relative: float64, a well-conditioned 2-column
    system); then one point moved by d with standard error s_i: chi^2 is the weighted residuals' sum, checked
    against the normal equations (X^T W X) b = X^T W y written out."""
    x = np.linspace(0.0, 1.0, 7)
    X = np.stack([np.ones_like(x), x], 1)
    fit = weighted_least_squares(X, 2 + 3 * x)
    assert isinstance(fit, LeastSquares) and fit.dof == 5
    np.testing.assert_allclose(fit.coef, [2.0, 3.0], rtol=1e-12)
    assert fit.chi2 == pytest.approx(0.0, abs=1e-24)
    y = 2 + 3 * x
    y[3] += 0.5
    se = np.array([1.0, 2.0, 1.0, 0.5, 1.0, 2.0, 1.0])
    fit = weighted_least_squares(X, y, se)
    W = np.diag(1 / se ** 2)
    cov = np.linalg.inv(X.T @ W @ X)
    b = cov @ X.T @ W @ y
    np.testing.assert_allclose(fit.coef, b, rtol=1e-12)
    np.testing.assert_allclose(fit.cov, cov, rtol=1e-12)
    assert fit.chi2 == pytest.approx(float(np.sum(((y - X @ b) / se) ** 2)), rel=1e-12)
    # weights matter: the heavily weighted point pulls the line (a control: unweighted differs)
    assert abs(weighted_least_squares(X, y).coef[0] - fit.coef[0]) > 1e-3


def test_weighted_least_squares_with_several_right_hand_sides():
    """K columns share X and the weights: each column's coefficients equal its own solve (bitwise: the columns are
    solved one at a time); a column with a non-finite value gets NaN coefficients and chi^2, the others do not."""
    rng = np.random.default_rng(1)
    X = np.stack([np.ones(6), np.arange(6.0), np.arange(6.0) ** 2], 1)
    Y = rng.normal(size=(6, 4))
    se = rng.uniform(0.5, 2.0, 6)
    fit = weighted_least_squares(X, Y, se)
    assert fit.coef.shape == (3, 4) and fit.chi2.shape == (4,) and fit.dof == 3
    for k in range(4):
        one = weighted_least_squares(X, Y[:, k], se)
        assert np.array_equal(one.coef, fit.coef[:, k]) and one.chi2 == fit.chi2[k]
    Y[2, 1] = np.inf
    Y[4, 3] = np.nan
    fit = weighted_least_squares(X, Y, se)
    assert np.isnan(fit.coef[:, [1, 3]]).all() and np.isnan(fit.chi2[[1, 3]]).all()
    assert np.isfinite(fit.coef[:, [0, 2]]).all() and np.isfinite(fit.chi2[[0, 2]]).all()


@pytest.mark.parametrize("X, y, se, match", [
    (np.ones(3), np.ones(3), None, r"X: expected \(N, P\) regressors"),
    (np.ones((2, 3)), np.ones(2), None, r"X: expected \(N, P\) regressors with N >= P"),
    (np.ones((3, 2)), np.ones(4), None, r"y: expected \(3,\) or \(3, K\) values"),
    (np.ones((3, 2)), np.ones(3), np.ones(2), r"se: expected \(3,\) finite standard errors"),
    (np.ones((3, 2)), np.ones(3), np.array([1.0, np.nan, 1.0]), r"se: expected \(3,\) finite standard errors"),
])
def test_weighted_least_squares_refuses_bad_shapes_by_name(X, y, se, match):
    with pytest.raises(ValueError, match=match):
        weighted_least_squares(X, y, se)


def test_a_curves_runs_are_selected_together():
    """select_runs cuts every per-run field alike (a hand count of the kept rows); the grad_evals stay."""
    t = np.arange(1.0, 13.0).reshape(3, 4)
    curve = TemperedCurve(t, -t, 1 / t, np.arange(3.0), 7, np.zeros((3, 5, 2)), np.ones((3, 4, 6)))
    kept = curve.select_runs(np.array([True, False, True]))
    np.testing.assert_array_equal(kept.t, t[[0, 2]])
    np.testing.assert_array_equal(kept.free_energy, -t[[0, 2]])
    np.testing.assert_array_equal(kept.mean_loss, 1 / t[[0, 2]])
    np.testing.assert_array_equal(kept.prior_mean_loss, [0.0, 2.0])
    assert kept.particles.shape == (2, 5, 2) and kept.draw_loss.shape == (2, 4, 6) and kept.grad_evals == 7
    assert curve._replace(draw_loss=None).select_runs([1]).draw_loss is None


def test_the_asymptotic_fit_returns_the_one_estimate_type():
    """fit_learning_coefficient's LambdaEstimate: lambda and its se, m or the reason it is not given, the method
    naming the estimator, the window it read (the last 3 decades up to the runs' smallest t_max), no warnings, and
    its AsymptoticFit details, whose lambda at the reported m is the estimate itself (bit for bit: one fit)."""
    t = np.logspace(1, 7, 60)
    rng = np.random.default_rng(2)
    slope = 0.5 + 1e-3 * rng.normal(size=(4, len(t)))
    F = 0.5 * np.log(t) + np.cumsum(1e-3 * rng.normal(size=(4, len(t))), 1) * 0.1
    curve = S.TemperedCurve(np.tile(t, (4, 1)), F, slope / t, np.zeros(4), 123)
    est = fit_learning_coefficient(curve, "tempered_loss", decades=3.0)
    assert isinstance(est, S.LambdaEstimate) and isinstance(est.details, AsymptoticFit)
    assert est.method == "asymptotic:tempered_loss" and est.details.estimator == "tempered_loss"
    assert est.window == pytest.approx((1e4, 1e7), rel=1e-12) and est.warnings == ()
    assert est.m == 1 and est.m_reason == ""
    assert est.lambda_ == est.details.lambda_by_m[1] and est.details.num_runs == 4 and est.details.grad_evals == 123
    assert abs(est.lambda_ - 0.5) < 5 * est.se and est.details.run_loss_min == (0.0,) * 4
    assert 0 <= est.details.residual_p <= 1 and est.details.residual_dof == 24 - 1
    assert math.isclose(est.se, est.details.lambda_se_runs, rel_tol=1e-12)
