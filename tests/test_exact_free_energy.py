"""The exact free energy of zero-truth reduced rank with one hidden unit (slt_relu.posterior.exact_free_energy:
K = |a|^2 |b|^2 / 2) against its closed form, an independent adaptive quadrature, its M <-> N symmetry and the
known lambda; and SMC's free energy of it, with the layers' GL(1) moves, against it.  The Gaussian free energy of a
quadratic loss (a regular model, population or one data set) against a two-dimensional quadrature and its
asymptotic form, and check_free_energy with each run's own exact F."""
import functools
import math

import jax
import numpy as np
import pytest
from scipy import integrate, special, stats
from scipy.stats import t as student_t

from slt_relu.known_lambda import reduced_rank
from slt_relu.posterior.exact_free_energy import check_free_energy, gaussian_free_energy, reduced_rank_one_free_energy

T = np.logspace(-2, 20, 23)


@pytest.mark.parametrize("prior_std", [1.0, 0.6])
def test_the_two_by_two_case_against_the_exponential_integral(prior_std):
    """M = N = 2: Z = e^x E_1(x) x, x = 1 / (2 t prior_std^4); measured agreement 3e-16, asserted 1e-12 (the
    quadrature's panels, summed in log space); halving the panels or doubling the nodes moves F by rounding only."""
    x = 1.0 / (2.0 * T * prior_std ** 4)
    closed = -np.log(special.exp1(x) * np.exp(x) * x)
    F = reduced_rank_one_free_energy(2, 2, T, prior_std)
    np.testing.assert_allclose(F, closed, rtol=0, atol=1e-12)
    np.testing.assert_allclose(reduced_rank_one_free_energy(2, 2, T, prior_std, panel=0.5), F, rtol=0, atol=1e-12)
    np.testing.assert_allclose(reduced_rank_one_free_energy(2, 2, T, prior_std, order=32), F, rtol=0, atol=1e-12)


@pytest.mark.parametrize("dims", [(3, 2), (1, 4), (5, 5)])
def test_against_adaptive_quadrature_and_the_exchange_of_input_and_output(dims):
    """Z = E_s[(1 + T s)^(-M / 2)], s ~ chi^2_N, by scipy's adaptive quadrature in log s (an independent rule):
    within 1e-10 (both near 1e-14 relative); and integrating a out first instead of b gives the same Z, so F is
    symmetric in (N, M) to rounding (1e-12)."""
    N, M = dims
    for t in (1e-2, 3.0, 1e4, 1e12):
        f = lambda u: math.exp(stats.chi2.logpdf(math.exp(u), N) + u) * (1 + t * math.exp(u)) ** (-M / 2)
        ref = -math.log(integrate.quad(f, -60 - math.log(max(t, 1.0)), 7, points=[-math.log(max(t, 1.0))],
                                       limit=2000, epsabs=0, epsrel=1e-13)[0])
        assert reduced_rank_one_free_energy(N, M, t) == pytest.approx(ref, abs=1e-10)
    np.testing.assert_allclose(reduced_rank_one_free_energy(N, M, T), reduced_rank_one_free_energy(M, N, T),
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("dims", [(2, 2), (3, 2), (2, 5), (4, 4)])
def test_the_slope_is_the_known_lambda(dims):
    """dF / dlog t = t E_t[K] = lambda - (m - 1) / log t + o(1 / log t), with (lambda, m) from
    ``known_lambda.reduced_rank(N, 1, M)`` (Aoyagi and Watanabe 2005): at t = 1e20 the slope plus (m - 1) / log t is
    lambda within 0.005 (the next terms: c / log^2 t, 0.0005, for m = 2; t^(-1/2) for m = 1)."""
    N, M = dims
    lam, m = reduced_rank(N, 1, M, 0)
    t1, t2 = 1e20 / 1.1, 1e20 * 1.1
    slope = float(reduced_rank_one_free_energy(N, M, t2) - reduced_rank_one_free_energy(N, M, t1)) / math.log(t2 / t1)
    assert slope + (m - 1) / math.log(1e20) == pytest.approx(lam, abs=5e-3)


@pytest.mark.parametrize("call, match", [
    (lambda: reduced_rank_one_free_energy(0, 2, 1.0), "input_dim: expected"),
    (lambda: reduced_rank_one_free_energy(2, 1.5, 1.0), "output_dim: expected"),
    (lambda: reduced_rank_one_free_energy(2, 2, [1.0, -1.0]), "t: expected finite inverse temperatures > 0"),
    (lambda: reduced_rank_one_free_energy(2, 2, 1.0, prior_std=0.0), "prior_std: expected"),
])
def test_bad_arguments_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_smc_with_layer_moves_follows_the_exact_free_energy():
    """8 SMC runs (128 particles, t up to 1e6) of reduced rank 2-1-2 with a zero truth, every HMC move followed by the
    layers' GL(1) proposal: the runs' mean F against the exact F at 12 log-spaced t in 1 .. 1e6, |z| below the
    Student-t bound at alpha = 0.01 with Bonferroni over the points (as for the normal crossings in
    tests/test_free_energy_curve.py; the moves' acceptance and invariance: tests/test_moves.py)."""
    from slt_relu.known_lambda.losses import ProductLoss
    from slt_relu.moves import LayerReparametrization
    from slt_relu.posterior.free_energy_curve import smc_free_energy_curve
    from slt_relu.sampling import SMCSettings

    runs, points = 8, 12
    settings = SMCSettings(num_particles=128, num_mcmc_steps=7, waste_free=True, target_ess=0.9, max_stages=1000,
                           symmetry_moves=True)
    loss = ProductLoss((2, 1, 2), ((0.0, 0.0), (0.0, 0.0)))
    with jax.enable_x64(True):
        curve = smc_free_energy_curve(jax.random.key(5), loss, 4, 1e6, settings, num_runs=runs,
                                      moves=LayerReparametrization((2, 1, 2)))
    check = check_free_energy(curve, functools.partial(reduced_rank_one_free_energy, 2, 2), 1.0, 1e6, points=points)
    bound = student_t.ppf(1 - 0.01 / (2 * points), runs - 1)
    assert np.max(np.abs(check.z)) < bound, check.z


H2 = np.array([[2.0, 0.3], [0.3, 0.5]])


@pytest.mark.parametrize("t, g, prior_std", [(0.5, (0.0, 0.0), 1.0), (3.0, (0.4, -0.2), 0.7), (40.0, (0.05, 0.1), 1.3)])
def test_the_gaussian_free_energy_against_quadrature(t, g, prior_std):
    """-log int N(w; 0, s^2 I) exp(-t (w^T H w / 2 - g^T w)) dw by scipy's adaptive two-dimensional quadrature over
    +-12 prior sd (the tails beyond are e^(-72)), within 1e-9 (measured 4e-16 at most)."""
    g = np.array(g)
    dens = lambda y, x: (np.exp(-(x * x + y * y) / (2 * prior_std ** 2)) / (2 * np.pi * prior_std ** 2)
                         * np.exp(-t * (0.5 * np.array([x, y]) @ H2 @ np.array([x, y]) - g @ np.array([x, y]))))
    r = 12 * prior_std
    Z = integrate.dblquad(dens, -r, r, -r, r, epsabs=1e-14, epsrel=1e-12)[0]
    assert gaussian_free_energy(H2, t, g, prior_std) == pytest.approx(-math.log(Z), abs=1e-9)


def test_the_gaussian_free_energy_has_a_regular_models_expansion():
    """F(t) = t L* + (d / 2) log t + c + c3 / t + O(t^(-2)), the form a data set's fit carries
    (slt_relu.posterior.free_energy_curve), with L* = -g^T H^(-1) g / 2, c = sum_i log(s^2 h_i) / 2 +
    g^T H^(-2) g / (2 s^2) and c3 = tr(H^(-1)) / (2 s^2) - g^T H^(-3) g / (2 s^4) (h_i the eigenvalues of H, s the
    prior's sd; expanding log(1 + x) and 1 / (1 + x) in 1 / x, x = t s^2 h_i): t (F - t L* - (d / 2) log t - c) at
    t = 1e5 is c3 = 1.80 within 1e-3 (the O(1 / t) rest: measured 2e-5; rounding of t L* times t: about 1e-6)."""
    g, s = np.array([0.3, -0.1]), 0.8
    Hi = np.linalg.inv(H2)
    Lstar = -0.5 * g @ Hi @ g
    c = 0.5 * np.sum(np.log(s * s * np.linalg.eigvalsh(H2))) + g @ Hi @ Hi @ g / (2 * s * s)
    c3 = np.trace(Hi) / (2 * s * s) - g @ Hi @ Hi @ Hi @ g / (2 * s ** 4)
    t = 1e5
    rest = gaussian_free_energy(H2, t, g, s) - t * Lstar - math.log(t) - c
    assert t * rest == pytest.approx(c3, abs=1e-3)


@pytest.mark.parametrize("call, match", [
    (lambda: gaussian_free_energy(np.array([[1.0, 2.0], [0.0, 1.0]]), 1.0), "hessian: expected a finite symmetric"),
    (lambda: gaussian_free_energy(-np.eye(2), 1.0), "hessian: expected positive definite"),
    (lambda: gaussian_free_energy(np.eye(2), 1.0, np.zeros(3)), r"gradient: expected a finite \(2,\) vector"),
    (lambda: gaussian_free_energy(np.eye(2), [1.0, 0.0]), "t: expected finite inverse temperatures > 0"),
    (lambda: gaussian_free_energy(np.eye(2), 1.0, prior_std=0.0), "prior_std"),
])
def test_bad_gaussian_arguments_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_check_free_energy_takes_each_runs_own_exact_free_energy():
    """One exact F per run (each run its own data set): each run's residual is against its own, the grid's exact
    values are (R, G); a sequence of the wrong length, or neither a function nor a sequence, is refused in one line."""
    from slt_relu.posterior.learning_coefficient import TemperedCurve

    t = np.tile(np.logspace(0, 3, 40), (2, 1))
    gs = [np.array([0.01, 0.0]), np.array([0.0, -0.02])]
    exact = [functools.partial(gaussian_free_energy, H2, gradient=g) for g in gs]
    offsets = np.array([[0.1], [-0.1]])
    curve = TemperedCurve(t, np.array([F(row) for F, row in zip(exact, t)]) + offsets, np.ones_like(t), np.zeros(2), 0)
    chk = check_free_energy(curve, exact, 1.0, 1e3, points=8)
    assert chk.exact.shape == (2, 8)
    np.testing.assert_allclose(chk.residual, np.broadcast_to(offsets, (2, 8)), atol=1e-12)
    np.testing.assert_allclose(chk.mean, 0.0, atol=1e-12)
    with pytest.raises(ValueError, match=r"exact: expected one function of t, or a sequence of one per run \(2\), got "
                                         r"list of 1"):
        check_free_energy(curve, exact[:1], 1.0, 1e3)
    with pytest.raises(ValueError, match=r"exact: expected .* got float"):
        check_free_energy(curve, 1.0, 1.0, 1e3)
