"""slt_relu.posterior.estimand_curve: NUTS's and SGLD's t E_t[K] at log-spaced temperatures, against the Gaussian
closed form of a regular quadratic (SGLD's with its Euler step's bias), and read by the tempered_loss rule; the
starting points of SGLD (the true set's deepest point); bad arguments refused by name."""
import math

import jax
import numpy as np
import pytest

from slt_relu.known_lambda.losses import PolynomialLoss, ProductLoss
from slt_relu.posterior.estimand_curve import mcmc_tempered_loss_curve, sgld_tempered_loss_curve
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
    assert curve.draw_loss.shape == (6, 5, 400) and curve.particles is None        # each chain's 400 draws at each t
    np.testing.assert_allclose(curve.draw_loss.mean(-1), curve.mean_loss, rtol=1e-12)
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
    assert abs(fit.lambda_ - 1.0) < 4 * fit.se + 0.01 and fit.details.num_runs == 6


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


def sgld_expected_tk(t, prior_std, step_scale):
    """SGLD's stationary t E[K] for K = w^T H w / 2: its Euler chain on the Gaussian of precision A = t H + I / s^2
    with the step eps = step_scale / t is Gaussian with the covariance (A (I - eps A / 4))^-1 (the AR(1) recursion
    z' = (I - eps A / 2) z + sqrt(eps) xi), so t E[K] = tr(t H (A (I - eps A / 4))^-1) / 2."""
    A = t * np.asarray(H) + np.eye(2) / prior_std ** 2
    eps = step_scale / t
    return 0.5 * np.trace(t * np.asarray(H) @ np.linalg.inv(A @ (np.eye(2) - eps * A / 4)))


def test_sgld_reaches_its_own_stationary_law_with_the_step_step_scale_over_t():
    """From the origin (K's minimum), at t = 10 .. 1e5: each t's mean over 8 chains against the closed form of
    SGLD's stationary law within 4.5 Monte Carlo standard errors (5 temperatures; a false alarm about 1e-4 under
    the chains' t distribution); with step_scale = 1 that law's Euler bias is +74 % to +124 % over the exact
    posterior's (eps A / 4 up to 0.66), far outside the errors, so the test sees whether the step really is
    step_scale / t at every t."""
    sgld = sgld_tempered_loss_curve(jax.random.PRNGKey(1), LOSS, np.zeros(2), 1e5, decades=4.0, temperatures=5,
                                    chains=8, prior_std=0.5, step_scale=1.0, num_steps=3000, num_burnin=200, thin=2)
    curve, accept, kappa = sgld.curve, sgld.accept_prob, sgld.step_scale
    np.testing.assert_allclose(curve.t, np.broadcast_to([10.0, 100.0, 1e3, 1e4, 1e5], (8, 5)), rtol=1e-12)
    assert curve.mean_loss.shape == accept.shape == (8, 5) and np.isnan(curve.free_energy).all()
    assert curve.draw_loss.shape == (8, 5, 1400)                     # (3000 - 200) / 2 kept steps of every chain
    np.testing.assert_allclose(curve.draw_loss.mean(-1), curve.mean_loss, rtol=1e-12)
    assert curve.grad_evals == 40 * 3001
    tk = curve.t * curve.mean_loss
    mean, se = tk.mean(0), tk.std(0, ddof=1) / math.sqrt(8)
    biased = np.array([sgld_expected_tk(t, 0.5, 1.0) for t in curve.t[0]])
    exact = np.array([expected_tk(t, 0.5) for t in curve.t[0]])
    assert np.all(np.abs(mean - biased) < 4.5 * se), (mean, biased, se)
    assert np.all(biased / exact > 1.15) and np.all(np.abs(mean - exact) > 4.5 * se)
    assert np.all((accept > 0) & (accept < 1)) and np.array_equal(kappa, np.ones(5))


def test_sgld_with_steps_chosen_by_the_pilots_acceptance_reads_lambda():
    """The pilots choose t eps_t on the ladder by their MALA acceptance (at least 0.999: for this quadratic, with
    the largest curvature 2.2 t, the Euler bias of the chosen step's variance is at most 2.2 t eps_t / 4), the same
    step at every t where t H dominates the prior; lambda = d / 2 = 1 over t = 100 .. 1e5 (the prior's pull, 3 % at
    t = 100, in the tolerance as for NUTS, and the chosen step's bias)."""
    from slt_relu.posterior.estimand_curve import STEP_LADDER

    sgld = sgld_tempered_loss_curve(jax.random.PRNGKey(2), LOSS, np.zeros(2), 1e5, decades=3.0, temperatures=4,
                                    chains=6, prior_std=0.5, num_steps=6000, num_burnin=1000, thin=5)
    curve, accept, kappa = sgld.curve, sgld.accept_prob, sgld.step_scale
    assert set(kappa) <= set(STEP_LADDER) and len(set(kappa[1:])) == 1 and 1e-3 <= kappa[-1] <= 0.1
    fit = fit_learning_coefficient(curve, "tempered_loss", decades=3.0, points=4, min_stages=4, max_multiplicity=1)
    assert abs(fit.lambda_ - 1.0) < 4 * fit.se + 0.01 + 2.2 * kappa.max() / 4 and accept.min() > 0.99


@pytest.mark.parametrize("widths, rank", [((3, 2, 3), 0), ((3, 2, 4), 2), ((2, 3, 3, 2), 1), ((4, 5, 2, 3, 4), 2)])
def test_the_deepest_true_point_is_a_balanced_factorization_of_the_truth(widths, rank):
    """K = 0 there (rtol from float64 over a product of L factors), every entry outside the leading rank-r blocks is
    zero, and each layer's nonzero singular values are S_r^(1/L) (balanced)."""
    rng = np.random.default_rng(rank + len(widths))
    C0 = rng.standard_normal((widths[-1], rank)) @ rng.standard_normal((rank, widths[0]))
    loss = ProductLoss(widths, tuple(map(tuple, C0)))
    w = loss.true_point()
    assert w.shape == (sum(a * b for a, b in zip(widths[:-1], widths[1:])),)
    assert float(loss(jax.numpy.asarray(w), None)) < 1e-24 * max(1.0, np.sum(C0 ** 2))
    S = np.linalg.svd(C0, compute_uv=False)[:rank]
    start, L = 0, len(widths) - 1
    for l, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        W = w[start:start + a * b].reshape(b, a)
        start += a * b
        outside = np.ones_like(W, bool)                   # the leading blocks: W_1's rows, W_L's columns, else r x r
        if l == 0:
            outside[:rank] = False
        elif l == L - 1:
            outside[:, :rank] = False
        else:
            outside[:rank, :rank] = False
        assert np.all(W[outside] == 0.0)
        np.testing.assert_allclose(np.linalg.svd(W, compute_uv=False)[:rank], S ** (1 / L), rtol=1e-12)
        assert np.allclose(np.linalg.svd(W, compute_uv=False)[rank:], 0.0, atol=1e-12)


def test_the_pilots_step_is_the_last_rung_before_the_first_failure():
    """(G = 3 temperatures, L = 5 rungs, 2 pilots): a pass above a failing rung is not taken (acceptance need not
    fall monotonically with the step); one failing pilot fails its rung; where the first rung fails, the first."""
    from slt_relu.posterior.estimand_curve import choose_steps

    accept = np.full((3, 5, 2), 0.9999)
    accept[0, 3, 1] = 0.5                                  # fails at rung 3: rung 2
    accept[1, 1, 0], accept[1, 4, :] = 0.99, 0.2          # fails at rung 1, passes at 2-3: rung 0
    accept[2, :, 0] = 0.1                                 # fails everywhere: rung 0
    assert choose_steps(accept, 0.999).tolist() == [2, 0, 0]
    assert choose_steps(np.full((1, 5, 2), 1.0), 0.999).tolist() == [4]


def test_the_polynomial_families_start_at_the_origin_where_their_gradient_is_finite():
    """K(0) = 0, and grad K(0) = 0 also along a coordinate K does not depend on (k_i = 0: w^0 as a float power has
    the derivative NaN there, which SGLD's first step would carry into the chain)."""
    for family, k in (("normal_crossing", (1, 2, 0)), ("sum", (1, 2, 3))):
        loss = PolynomialLoss(family, k)
        w0 = loss.true_point()
        assert np.array_equal(w0, np.zeros(3)) and float(loss(jax.numpy.asarray(w0), None)) == 0.0
        assert np.array_equal(np.asarray(jax.grad(loss)(jax.numpy.asarray(w0), None)), np.zeros(3))
    assert np.array_equal(LOSS.true_point(), np.zeros(2))


@pytest.mark.parametrize("kwargs, match", [
    ({"step_scale": 0}, r"step_scale: expected a positive number \(t eps_t\) or None"),
    ({"step_scale": float("inf")}, "step_scale"),
    ({"step_scale": True}, "step_scale"),
    ({"accept_target": 1.0}, r"accept_target: expected a number in \(0, 1\)"),
    ({"pilot_steps": 1}, "pilot_steps"),
    ({"start": np.zeros((2, 1))}, r"start: expected a flat point \(D,\)"),
    ({"start": np.array([0.0, np.nan])}, "start: expected finite numbers"),
    ({"num_burnin": 10}, r"^num_burnin: expected an integer in \[0, num_steps = 10\), got 10$"),
    ({"num_burnin": -1}, r"^num_burnin: expected an integer"),
    ({"start": np.zeros(3)}, r"^start: expected a point the loss takes, got shape \(3,\)"),
    ({"decades": 4.0}, "decades: expected"),
    ({"chains": 1}, "chains"),
])
def test_bad_sgld_arguments_are_refused_by_name(kwargs, match):
    args = {"decades": 2.0, "temperatures": 3, "chains": 2, "num_steps": 10, "num_burnin": 2, "start": np.zeros(2),
            **kwargs}
    start = args.pop("start")
    with pytest.raises(ValueError, match=match):
        sgld_tempered_loss_curve(jax.random.PRNGKey(0), LOSS, start, 1e4, **args)
