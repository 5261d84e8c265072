"""slt_relu.posterior.estimand_curve: NUTS's t E_t[K] at log-spaced temperatures, against the Gaussian closed form
of a regular quadratic, and read by the tempered_loss rule; bad arguments refused by name."""
import math

import jax
import numpy as np
import pytest

from slt_relu.kinds.lambda_losses import PolynomialLoss
from slt_relu.posterior.estimand_curve import mcmc_tempered_loss_curve
from slt_relu.posterior.free_energy_curve import fit_learning_coefficient
from slt_relu.sampling import NUTSSettings

H = ((2.0, 0.5), (0.5, 1.0))
LOSS = PolynomialLoss("regular", (), H)
SETTINGS = NUTSSettings(num_warmup=200, num_samples=400)


def expected_tk(t, prior_std):
    """E_t[t K] for K = w^T H w / 2 under N(0, prior_std^2 I) exp(-t K): the posterior is N(0, (t H + I / s^2)^-1),
    so E[t K] = tr(t H (t H + I / s^2)^-1) / 2."""
    A = t * np.asarray(H)
    return 0.5 * np.trace(A @ np.linalg.inv(A + np.eye(2) / prior_std ** 2))


@pytest.fixture(scope="module")
def curve():
    return mcmc_tempered_loss_curve(jax.random.PRNGKey(0), LOSS, 2, 1e5, decades=4.0, temperatures=5, chains=6,
                                    prior_std=0.5, settings=SETTINGS)


def test_the_curve_is_t_e_k_of_each_chain_at_log_spaced_temperatures(curve):
    np.testing.assert_allclose(curve.t, np.broadcast_to([10.0, 100.0, 1e3, 1e4, 1e5], (6, 5)), rtol=1e-12)
    assert curve.mean_loss.shape == (6, 5) and np.isnan(curve.free_energy).all() and curve.grad_evals > 0
    tk = curve.t * curve.mean_loss
    mean, se = tk.mean(0), tk.std(0, ddof=1) / math.sqrt(6)
    exact = np.array([expected_tk(t, 0.5) for t in curve.t[0]])
    # within 4 Monte Carlo standard errors (the chains' spread), 5 temperatures; and the prior's pull is seen:
    # at t = 10 the closed form sits 0.12 below the regular value d / 2 = 1, far outside the errors
    assert np.all(np.abs(mean - exact) < 4 * se), (mean, exact, se)
    assert exact[0] < 0.9 and abs(mean[0] - 1.0) > 4 * se[0]


def test_the_tempered_loss_rule_reads_lambda_off_it(curve):
    """On the last three decades (t = 100 .. 1e5) lambda = d / 2 = 1; the prior pulls t E_t[K] down by 3 % at
    t = 100 and 0.3 % at 1e3 (the closed form), which the tolerance's 0.01 carries."""
    fit = fit_learning_coefficient(curve, "tempered_loss", decades=3.0, points=4, min_stages=4, max_multiplicity=1)
    assert abs(fit.lambda_ - 1.0) < 4 * fit.lambda_se + 0.01 and fit.num_runs == 6


@pytest.mark.parametrize("kwargs, match", [
    ({"decades": 4.0}, r"decades: expected a number in \(0, log10\(t_max\) = 4\)"),
    ({"decades": 0}, "decades: expected"),
    ({"chains": 1}, "chains"),
    ({"temperatures": 1}, "temperatures"),
    ({"t_max": float("nan")}, "t_max"),
])
def test_bad_arguments_are_refused_by_name(kwargs, match):
    args = {"decades": 2.0, "temperatures": 3, "chains": 2, "t_max": 1e4, **kwargs}
    t_max = args.pop("t_max")
    with pytest.raises(ValueError, match=match):
        mcmc_tempered_loss_curve(jax.random.PRNGKey(0), LOSS, 2, t_max, settings=SETTINGS, **args)
