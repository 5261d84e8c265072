"""The TMS losses through the toolkit's samplers: the tempered target of any loss, the local learning
coefficient (SGLD) at k-gons against the first-principles lambda, and tempered SMC's free-energy curve."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt_relu.posterior.free_energy_curve import smc_free_energy_curve
from slt_relu.posterior.llc import LLCSettings, estimate_llc
from slt_relu.posterior import Prior
from slt_relu.posterior.target import TemperedTarget
from slt_relu.pytree import unravel_fn
from slt_relu.sampling import SMCSettings
from slt_relu.tms import (empirical_loss, flat_empirical_loss, hessian_counts, population_loss, refined_kgon,
                          sample_inputs, to_flat)

DUMMY = jnp.zeros((1,))


def population(params, data):
    """L(w) as a loss of (params, data) that ignores its data."""
    return population_loss(params)


def test_tempered_target_of_the_empirical_loss_by_hand():
    """U(w) = n beta L_n(w) + |w|^2 / (2 s^2) + D log(s sqrt(2 pi)) + (gamma / 2) |w - w*|^2 on the flat coordinates
    (W row-major, b): -log of the normalised prior N(0, s^2 I)."""
    p = refined_kgon(4, 4)
    x = sample_inputs(jax.random.key(0), 64, 4)
    w0, unravel = unravel_fn(p)
    np.testing.assert_array_equal(w0, to_flat(p))
    w = w0 + 0.1 * jax.random.normal(jax.random.key(1), w0.shape)
    U = TemperedTarget(empirical_loss, unravel, Prior.normal(2.0))(x, 50.0, 3.0, w0)
    want = (50.0 * empirical_loss(unravel(w), x) + jnp.sum(w ** 2) / 8.0 + w.size * np.log(2.0 * np.sqrt(2 * np.pi))
            + 1.5 * jnp.sum((w - w0) ** 2))
    assert float(U(w)) == pytest.approx(float(want), rel=1e-13)


@pytest.mark.parametrize("c, k, n_pos, lam", [(5, 5, 0, 7.0), (6, 5, 1, 8.5)])
def test_sgld_llc_at_a_kgon_matches_the_quadratic_prediction(c, k, n_pos, lam):
    """SGLD on exp(-n beta L - (gamma/2)|w - w*|^2) at a strict k-gon minimum (the exact population loss, n beta =
    1e4, gamma = 1, eps = 1e-5).  Where L is quadratic, E[n beta (L - L*)] = sum_i a_i / (2 A_i (1 - eps A_i / 4)),
    a_i = n beta h_i over the Hessian's eigenvalues h_i, A_i = a_i + gamma (the Euler chain's stationary law), near
    lambda = rank(H)/2.  Tolerance 4 se + 5 %: the softest direction's posterior sd is 1 / sqrt(1e4 * 0.06) = 0.04,
    where the cubic terms of L are not negligible."""
    p = refined_kgon(c, k, n_pos)
    h = hessian_counts(p).eigenvalues
    nb, gamma, eps = 1e4, 1.0, 1e-5
    a = nb * np.clip(h, 0, None)
    A = a + gamma
    want = float(np.sum(a / (2 * A * (1 - eps * A / 4))))
    assert want == pytest.approx(lam, rel=0.03)
    est = estimate_llc(jax.random.key(2), population, p, DUMMY,
                       LLCSettings(num_chains=4, num_steps=8000, num_burnin=2000, step_size=eps,
                                       localization=gamma, n_beta=nb))
    assert abs(est.lambda_ - want) < 4 * est.se + 0.05 * want
    assert est.details.accept_prob.min() > 0.95


def test_sgld_llc_at_the_square_matches_the_sandwich_lambda():
    """c = 4, the 4-gon (l = 1, b = 0, L = 0): L is not C^2 there, the one-sided Hessian and the Fisher information
    have rank 8 (rank / 2 = 4), while the sandwich bound gives lambda = c + 3/2 = 5.5 (slt_relu.tms.critical_points).  SGLD as
    above (eps = 5e-6, 8 chains): within 4 se + 5 % (the Euler step's bias, eps A / 4 <= 3 %) of 5.5, which
    excludes 4."""
    from slt_relu.tms import kgon_record

    row = kgon_record(4, 4)
    assert row.lambda_ == 5.5 and row.hessian_positive == row.fisher_rank == 8
    est = estimate_llc(jax.random.key(2), population, refined_kgon(4, 4), DUMMY,
                       LLCSettings(num_chains=8, num_steps=20000, num_burnin=5000, step_size=5e-6,
                                       localization=1.0, n_beta=1e4))
    assert abs(est.lambda_ - 5.5) < 4 * est.se + 0.05 * 5.5
    assert est.lambda_ - 4 * est.se > 4.0


def test_estimate_llc_and_smc_run_on_the_empirical_loss():
    """Plumbing on the empirical loss of a tiny data set (c = 4, n = 200): SGLD at the 4-gon and tempered SMC from
    the prior N(0, 1) on the flat parameters, each a few steps, give finite numbers of the documented shapes."""
    x = sample_inputs(jax.random.key(0), 200, 4)
    est = estimate_llc(jax.random.key(1), empirical_loss, refined_kgon(4, 4), x,
                       LLCSettings(num_chains=2, num_steps=300, num_burnin=100, step_size=1e-4))
    assert est.details.loss_trace.shape == (2, 200) and np.isfinite(est.lambda_)
    curve = smc_free_energy_curve(jax.random.key(3), flat_empirical_loss, 12, 200.0,
                                  SMCSettings(num_particles=64, num_mcmc_steps=2, num_leapfrog=4, max_stages=40),
                                  num_runs=2, data=x)
    assert curve.t.shape[0] == 2
    assert np.all(np.nanmax(curve.t, axis=1) == pytest.approx(200.0))
    ok = np.isfinite(curve.t)
    assert np.all(np.isfinite(curve.free_energy[ok])) and np.all(np.isfinite(curve.mean_loss[ok]))
