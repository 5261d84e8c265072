"""lambda and m from the free-energy curve (slt_relu.posterior.free_energy_curve): the fit on exact curves
(closed forms and one-dimensional quadrature), and on tempered SMC runs of normal crossings against
slt_relu.known_lambda, with tolerances from the runs' own standard errors; the exact free energy of a
two-parameter normal crossing (normal_crossing_free_energy) against closed forms and independent quadrature, and
SMC's log Z against it (check_free_energy)."""
import functools

import jax
import numpy as np
import pytest
from scipy import integrate
from scipy.special import k0e
from scipy.stats import t as student_t

from slt_relu.known_lambda import normal_crossing
from slt_relu.posterior.exact_free_energy import check_free_energy, normal_crossing_free_energy
from slt_relu.posterior.free_energy_curve import fit_learning_coefficient, smc_free_energy_curve
from slt_relu.posterior.learning_coefficient import TemperedCurve, stack_curves
from slt_relu.sampling import SMCSettings


def _exact_square(t):
    """K = w^2, w ~ N(0, 1): Z = (1 + 2t)^(-1/2), E_t[K] = 1 / (1 + 2t)."""
    return 0.5 * np.log1p(2 * t), 1.0 / (1.0 + 2 * t)


def _exact_cross(t):
    """K = w1^2 w2^2, w ~ N(0, I): Z = E_w1[(1 + 2 t w1^2)^(-1/2)], -dZ/dt = E_w1[w1^2 (1 + 2 t w1^2)^(-3/2)]."""
    def gauss(f):
        g = lambda x: 2 * np.exp(-x * x / 2) / np.sqrt(2 * np.pi) * f(x)
        cuts = [0, 1 / np.sqrt(t), 10 / np.sqrt(t), 1, 12]
        return sum(integrate.quad(g, a, b, epsabs=0, epsrel=1e-12, limit=200)[0] for a, b in zip(cuts, cuts[1:]))
    Z = gauss(lambda x: (1 + 2 * t * x * x) ** -0.5)
    return -np.log(Z), gauss(lambda x: x * x * (1 + 2 * t * x * x) ** -1.5) / Z


def _noisy_curves(exact, runs, noise, seed):
    """Curves at each run's own (jittered, log-spaced) stages, with independent noise on E_t[K] and F."""
    rng = np.random.default_rng(seed)
    ts, Fs, Ls = [], [], []
    for _ in range(runs):
        t = np.sort(np.exp(rng.uniform(np.log(10.0), np.log(1e7), 60)))
        F, L = np.array([exact(x) for x in t]).T
        ts.append(t)
        Fs.append(F + noise * np.cumsum(rng.normal(size=t.size)) / 10)
        Ls.append(L * (1 + noise * rng.normal(size=t.size)))
    return TemperedCurve(np.array(ts), np.array(Fs), np.array(Ls), np.zeros(runs), 0)


@pytest.mark.parametrize("exact, lam, m", [(_exact_square, 0.5, 1), (_exact_cross, 0.5, 2)])
def test_the_fit_on_exact_curves(exact, lam, m):
    """Noise-free curves (2 identical runs): the fitted lambda is the asymptotic one to the size of the terms
    the form leaves out (t^(-1) for w^2, 1 / log^2 t for w1^2 w2^2 over t = 1e4 .. 1e7: 1 %)."""
    curve = _noisy_curves(exact, 2, 0.0, 0)
    for estimator in ("free_energy", "tempered_loss", "thermodynamic"):
        fit = fit_learning_coefficient(curve, estimator)
        assert fit.details.lambda_by_m[m] == pytest.approx(lam, rel=0.01 if m == 2 else 1e-3), estimator
        assert fit.window == pytest.approx((1e4 * fit.window[1] / 1e7, fit.window[1]))


def test_the_fit_with_noise_recovers_lambda_within_its_standard_error():
    curve = _noisy_curves(_exact_square, 8, 0.01, 1)
    fit = fit_learning_coefficient(curve, "tempered_loss")
    assert fit.m == 1
    assert abs(fit.lambda_ - 0.5) < 3 * fit.se + 1e-3       # 1e-3: the t^-1 terms the form leaves out
    assert 0 < fit.se < 0.01


SETTINGS = SMCSettings(num_particles=2048, num_mcmc_steps=7, waste_free=True, target_ess=0.9, max_stages=1000)


def square(w, data):
    return w[0] ** 2


def cross(w, data):
    return w[0] ** 2 * w[1] ** 2


def square_plus_quartic(w, data):
    return w[0] ** 2 + w[1] ** 4


@pytest.mark.parametrize("loss, dim, k, kind", [(square_plus_quartic, 2, (1, 2), "sum"),
                                               (cross, 2, (1, 1), "product")])
def test_smc_free_energy_curves_give_the_known_lambda(loss, dim, k, kind):
    """8 runs of tempered SMC on the potential itself, t up to 1e8, fitted over its last 5 decades: lambda
    within 5 % of the exact value and 4 standard errors (of 8 runs: Student's t with 7 degrees of freedom
    puts 0.5 % beyond 4) plus 1 % (the terms the form leaves out and log Z's bias; over five seeds the sum
    case sat 0.2-0.9 % low), by every estimator; m where it is identified (for w1^2 w2^2 it is not at this
    range: lambda is then the m = 2 fit's)."""
    lam, m = normal_crossing(k, kind)
    with jax.enable_x64(True):
        curve = smc_free_energy_curve(jax.random.key(0), loss, dim, 1e8, SETTINGS, num_runs=8)
    for estimator in ("free_energy", "tempered_loss", "thermodynamic"):
        fit = fit_learning_coefficient(curve, estimator, decades=5)
        assert fit.m in (None, m), (estimator, fit)
        value = fit.lambda_ if fit.m is not None else fit.details.lambda_by_m[m]
        assert abs(value - float(lam)) < 4 * fit.se + 0.01 * float(lam), (estimator, fit)
        assert abs(value - float(lam)) < 0.05 * float(lam), (estimator, fit)
    assert fit_learning_coefficient(curve, "tempered_loss", decades=5).m in (None, m)      # never a wrong m


def test_bad_arguments_are_named():
    curve = _noisy_curves(_exact_square, 2, 0.0, 0)
    with pytest.raises(ValueError, match="estimator: expected one of"):
        fit_learning_coefficient(curve, "wbic")
    with pytest.raises(ValueError, match="decades: expected"):
        fit_learning_coefficient(curve, decades=-1)
    with pytest.raises(ValueError, match="curve: expected at least 2 independent runs"):
        fit_learning_coefficient(curve._replace(t=curve.t[:1]))
    with pytest.raises(ValueError, match="curve: expected at least 6 stages"):
        fit_learning_coefficient(curve, decades=7)            # reaches below t = 1


def test_curves_of_different_lengths_stack_with_nan_padding():
    """Two curves, (2 runs, 3 stages) and (1 run, 4 stages): one (2, 2, 4) array, each curve's numbers in its
    corner and NaN elsewhere (a hand count of the cells)."""
    a = TemperedCurve(np.arange(6.0).reshape(2, 3), -np.arange(6.0).reshape(2, 3), np.ones((2, 3)), np.ones(2), 0)
    b = TemperedCurve(np.arange(4.0)[None], np.zeros((1, 4)), np.ones((1, 4)), np.ones(1), 0)
    t = stack_curves([a, b], "t")
    assert t.shape == (2, 2, 4)
    np.testing.assert_array_equal(t[0, :, :3], a.t)
    np.testing.assert_array_equal(t[1, 0], b.t[0])
    assert np.isnan(t[0, :, 3]).all() and np.isnan(t[1, 1]).all() and np.isnan(t).sum() == 2 + 4
    np.testing.assert_array_equal(stack_curves([a, b], "free_energy")[0, :, :3], a.free_energy)


def _cross_by_quad(t, k2, s):
    """F(t) of K = w1^2 w2^(2 k2) by scipy's adaptive quadrature of the one-dimensional form: the w1 integral is
    closed, int N(w1; 0, s^2) exp(-a w1^2) dw1 = (1 + 2 a s^2)^(-1/2) with a = t w2^(2 k2), so
    Z(t) = E_w2[(1 + 2 t s^2 w2^(2 k2))^(-1/2)], cut at the neck w2 ~ t^(-1/(2 k2)) and the prior's 12 sd."""
    g = lambda w: (2 * np.exp(-w * w / (2 * s * s)) / (s * np.sqrt(2 * np.pi))
                   * (1 + 2 * t * s * s * w ** (2 * k2)) ** -0.5)
    neck = t ** (-1 / (2 * k2))
    cuts = sorted({0.0, *(c for c in (1e-3 * neck, neck, 10 * neck) if c < 12 * s), s, 12 * s})
    return -np.log(sum(integrate.quad(g, a, b, epsabs=0, epsrel=1e-13, limit=400)[0] for a, b in zip(cuts, cuts[1:])))


@pytest.mark.parametrize("prior_std", [1.0, 0.5])
def test_normal_crossing_free_energy_against_the_bessel_closed_form(prior_std):
    """K = w1^2 w2^2 under N(0, s^2 I): Z(t) = E_w1[(1 + 2 t s^2 w1^2)^(-1/2)] = e^x K_0(x) / (2 sqrt(pi T)),
    x = 1 / (8 T), T = t s^4 (w1 = s sinh(theta) / sqrt(2 T) turns it into int_0^inf e^(-x cosh 2 theta) dtheta
    = K_0(x) / 2), over t = 1e-3 .. 1e20; and the rule resolved: halving its panels or doubling its nodes moves F
    (at every fourth t) by rounding only (1e-12: F is at most ~30, so 1e-12 is ~30 ulps)."""
    t = np.logspace(-3, 20, 47)
    T = t * prior_std ** 4
    closed = np.log(2 * np.sqrt(np.pi * T)) - np.log(k0e(1 / (8 * T)))
    F = normal_crossing_free_energy((1, 1), t, prior_std)
    assert F.shape == t.shape
    np.testing.assert_allclose(F, closed, rtol=0, atol=1e-12)
    coarse = slice(None, None, 4)             # the resolution on every fourth t (each rule costs as much again)
    np.testing.assert_allclose(normal_crossing_free_energy((1, 1), t[coarse], prior_std, panel=0.5), F[coarse], rtol=0,
                               atol=1e-12)
    np.testing.assert_allclose(normal_crossing_free_energy((1, 1), t[coarse], prior_std, order=32), F[coarse], rtol=0,
                               atol=1e-12)


@pytest.mark.parametrize("k2, prior_std", [(2, 1.0), (3, 0.3)])
def test_normal_crossing_free_energy_against_adaptive_quadrature(k2, prior_std):
    """K = w1^2 w2^(2 k2): the tensor Gauss-Legendre rule in log coordinates against scipy's adaptive quadrature of
    the one-dimensional form (an independent rule in other coordinates), in either order of k: 1e-12 (both
    rules reach 1e-13 relative on F ~ 10)."""
    t = np.logspace(-2, 18, 11)
    ref = np.array([_cross_by_quad(x, k2, prior_std) for x in t])
    np.testing.assert_allclose(normal_crossing_free_energy((1, k2), t, prior_std), ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(normal_crossing_free_energy((k2, 1), t, prior_std), ref, rtol=0, atol=1e-12)


def test_normal_crossing_free_energy_against_a_brute_two_dimensional_quadrature():
    """K = w1^4 w2^4 (neither integral closed) at t = 10: scipy's dblquad over the quadrant (x 4), 1e-9."""
    t = 10.0
    phi = lambda w: np.exp(-w * w / 2) / np.sqrt(2 * np.pi)
    Z = 4 * integrate.dblquad(lambda a, b: phi(a) * phi(b) * np.exp(-t * a ** 4 * b ** 4), 0, 12, 0, 12,
                              epsabs=1e-13, epsrel=1e-11)[0]
    assert normal_crossing_free_energy((2, 2), t) == pytest.approx(-np.log(Z), abs=1e-9)


@pytest.mark.parametrize("k", [(1, 1), (2, 2), (1, 2), (1, 3), (2, 3), (0, 1), (3, 0)])
def test_normal_crossing_free_energy_slope_is_lambda(k):
    """dF / dlog t between t = 1e18 and 1e20 against F = lambda log t - (m - 1) log log t + c + c2 / log t + ...,
    lambda = min_i 1 / (2 k_i) over k_i > 0 and m the number of k_i attaining it (known_lambda.normal_crossing):
    m = 1 to t^(-gap), gap the distance to the next pole of the zeta function (its poles are (2 j + 1) / (2 k_i):
    a correction t^(-gap) to Z; 1e-12 rounding), m = 2 after removing the log log t term to 10 / log^2 t = 5e-3
    (the c2 term; the m = 1 reading would be off by 1 / log t = 0.023)."""
    lam, m = normal_crossing(k)
    t1, t2 = 1e18, 1e20
    slope = float(normal_crossing_free_energy(k, t2) - normal_crossing_free_energy(k, t1)) / np.log(t2 / t1)
    slope += (m - 1) * (np.log(np.log(t2)) - np.log(np.log(t1))) / np.log(t2 / t1)
    gap = min((2 * j + 1) / (2 * ki) for ki in k if ki for j in range(4) if (2 * j + 1) / (2 * ki) > lam) - lam
    assert slope == pytest.approx(float(lam), abs=max(t1 ** -gap, 1e-12) if m == 1 else 10 / np.log(t1) ** 2)
    if m == 2:
        assert abs(slope - (m - 1) / np.log(t1) - float(lam)) > 0.015


@pytest.mark.parametrize("call, match", [
    (lambda: normal_crossing_free_energy((1,), 1.0), "k: expected two non-negative integers"),
    (lambda: normal_crossing_free_energy((0, 0), 1.0), "k: expected two non-negative integers"),
    (lambda: normal_crossing_free_energy((1, 1.5), 1.0), "k: expected two non-negative integers"),
    (lambda: normal_crossing_free_energy((1, 1), [1.0, 0.0]), "t: expected finite inverse temperatures > 0"),
    (lambda: normal_crossing_free_energy((1, 1), 1.0, prior_std=-1.0), "prior_std: expected"),
])
def test_normal_crossing_free_energy_refuses_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


CHECK_RUNS, CHECK_POINTS = 8, 12


@pytest.fixture(scope="module")
def cross_curve():
    """8 short SMC runs (128 particles, t up to 1e4) of w1^2 w2^2 under N(0, I)."""
    settings = SMCSettings(num_particles=128, num_mcmc_steps=7, waste_free=True, target_ess=0.9, max_stages=1000)
    with jax.enable_x64(True):
        return smc_free_energy_curve(jax.random.key(2), cross, 2, 1e4, settings, num_runs=CHECK_RUNS)


def test_smc_free_energy_agrees_with_the_exact_quadrature(cross_curve):
    """SMC's log Z of w1^2 w2^2 against normal_crossing_free_energy at 12 log-spaced t in 1 .. 1e4: the mean residual
    of 8 runs over its standard error is Student's t with 7 degrees of freedom at each point, so with a Bonferroni
    bound over the 12 points |z| stays below the t quantile of 1 - 0.01 / 24 in 99 % of seeds (the exact F's own
    error, 1e-12, is nothing beside SMC's 0.01-0.1).  The control: the same check against an exact F shifted by
    2 threshold x the largest se fails, so the check can fail."""
    exact = functools.partial(normal_crossing_free_energy, (1, 1))
    check = check_free_energy(cross_curve, exact, 1.0, 1e4, points=CHECK_POINTS)
    threshold = student_t.ppf(1 - 0.01 / (2 * CHECK_POINTS), CHECK_RUNS - 1)
    assert check.t.shape == check.z.shape == (CHECK_POINTS,) and check.residual.shape == (CHECK_RUNS, CHECK_POINTS)
    assert check.t[0] == pytest.approx(1.0) and check.t[-1] == pytest.approx(1e4)
    assert np.all(check.se > 0) and np.max(np.abs(check.z)) < threshold, check.z
    np.testing.assert_allclose(check.exact, exact(check.t), rtol=1e-15)
    shift = 2 * threshold * float(np.max(check.se))
    wrong = check_free_energy(cross_curve, lambda t: exact(t) + shift, 1.0, 1e4, points=CHECK_POINTS)
    assert np.max(np.abs(wrong.z)) > threshold
    np.testing.assert_allclose(wrong.mean, check.mean - shift, atol=1e-12)


def test_check_free_energy_refuses_bad_windows(cross_curve):
    exact = functools.partial(normal_crossing_free_energy, (1, 1))
    with pytest.raises(ValueError, match="t_lo, t_hi: expected 0 < t_lo < t_hi <= every run's last t"):
        check_free_energy(cross_curve, exact, 1.0, 1e5)
    with pytest.raises(ValueError, match="curve: expected at least 2 independent runs"):
        check_free_energy(cross_curve._replace(t=cross_curve.t[:1]), exact, 1.0, 1e4)


def test_m_one_needs_m_two_to_fit_worse_by_four():
    """m = 1 is identified only where m = 2 fits worse by at least 4 in chi^2: a flat curve t E_t[L] = lambda with
    noise so large against the window's change of 1 / log t (t = 1e11 .. 1e16: 0.039 to 0.027) that m = 1 and
    m = 2 fit alike reads m = 1 as not identifiable (the reason says larger m fit as well); the same curve with
    little noise reads m = 1."""
    import math

    import numpy as np

    t = np.logspace(10, 16, 60)
    rng = np.random.default_rng(0)

    def curve(noise):
        slope = 0.25 + noise * rng.normal(size=(8, len(t)))
        F = 0.25 * np.log(t) + np.cumsum(noise * rng.normal(size=(8, len(t))), 1) * 0.01
        return TemperedCurve(np.tile(t, (8, 1)), F, slope / t, np.zeros(8), 0)

    quiet = fit_learning_coefficient(curve(1e-4), "tempered_loss", decades=5)
    assert quiet.m == 1 and quiet.details.chi2_by_m[2] - quiet.details.chi2_by_m[1] >= 4
    noisy = fit_learning_coefficient(curve(0.05), "tempered_loss", decades=5)
    gap = noisy.details.chi2_by_m[2] - noisy.details.chi2_by_m[1]
    assert gap < 4 and noisy.m is None and "larger m fit as well" in noisy.m_reason, (gap, noisy.m_reason)
    assert math.isclose(noisy.details.lambda_by_m[1], 0.25, abs_tol=0.05)
    # lambda's standard error: over runs where m is identified; with the choice of m where it is not
    q, d = quiet.details, noisy.details
    assert q.m_candidates == (1,) and quiet.se == q.lambda_se_runs == q.lambda_se_by_m[1]
    assert d.m_candidates == (1, 2) and d.lambda_se_runs == d.lambda_se_by_m[1]
    spread = d.lambda_by_m[2] - d.lambda_by_m[1]       # lambda if m were 2, against the reported m = 1's
    assert math.isclose(noisy.se, math.sqrt(d.lambda_se_runs ** 2 + spread ** 2 / 2), rel_tol=1e-12)
    assert noisy.se > d.lambda_se_runs


def _regular_data_curves(runs, seed):
    """Exact curves of a regular model on data sets (d = 4): L(w) - L(w0) = (w - w0)^T S (w - w0) / 2 - g^T (w - w0)
    under w ~ N(0, I), with S near I and g of size 1 / sqrt(n), n = 1e5 (each run its own S, g):

        F(t) = log det(I + t S) / 2 - b^T (I + t S)^(-1) b / 2 + t (w0^T S w0 / 2 + g^T w0),  b = t (S w0 + g),

    and t E_t[L] = dF / dlog t by central differences (step 1e-5 in log t: rounding error about 5e-7).  Returns the curves
    and each run's L* = min_w L(w) - L(w0) = -g^T S^(-1) g / 2."""
    rng = np.random.default_rng(seed)
    t = np.logspace(-1, 5, 400)
    w0 = np.array([0.5, -0.5, 1.0, 0.3])

    def F(S, g, tt):
        A = np.eye(4) + tt * S
        b = tt * (S @ w0 + g)
        return 0.5 * np.linalg.slogdet(A)[1] - 0.5 * b @ np.linalg.solve(A, b) + tt * (0.5 * w0 @ S @ w0 + g @ w0)

    Fs, Ls, Lstar = [], [], []
    for _ in range(runs):
        X = rng.normal(size=(4, 4))
        S, g = np.eye(4) + 0.3 * X @ X.T / 4, rng.normal(size=4) / np.sqrt(1e5)
        Fs.append([F(S, g, x) for x in t])
        Ls.append([(F(S, g, x * np.exp(1e-5)) - F(S, g, x * np.exp(-1e-5))) / 2e-5 / x for x in t])
        Lstar.append(-0.5 * g @ np.linalg.solve(S, g))
    return TemperedCurve(np.tile(t, (runs, 1)), np.array(Fs), np.array(Ls), np.zeros(runs), 0), np.array(Lstar)


@pytest.mark.parametrize("estimator", ["free_energy", "tempered_loss"])
def test_a_data_sets_curve_carries_the_regular_directions_1_over_t(estimator):
    """A data set's curve is read over t <= n (here 1e2 .. 1e5, L* fitted), where the prior's O(1 / t) correction of a
    regular model is as large as m's signal: with c3 / t in the form, the exact curves read lambda = d / 2 = 2 up to
    the O(t^(-2)) terms the form leaves out (measured 1e-5), the rule prefers m = 1, and each run's fitted L* is its
    exact minimum to 0.1 % (measured 1.5e-5 and 5e-5 of |L*| = 5e-6 .. 2e-5); without the term, the rule preferred
    m = 2 and read 2.08, and even at m = 1 L* was off by 1.2 % (F) and 0.7 % (t E_t[L])."""
    curve, exact_lstar = _regular_data_curves(4, 0)
    fit = fit_learning_coefficient(curve, estimator, loss_min=None, decades=3.0)
    assert fit.lambda_ == pytest.approx(2.0, abs=5e-4)
    assert fit.details.lambda_by_m[1] == fit.lambda_
    assert np.asarray(fit.details.run_loss_min) == pytest.approx(exact_lstar, rel=1e-3)


def test_the_fit_needs_points_for_every_candidate_on_each_half():
    """Each half of the window must hold more points than the largest candidate's terms: m = 3 on t E_t[L] with L*
    fitted has lambda, c2, c3 and L* (10 points at least), without L* lambda and c2 (6)."""
    curve = _regular_data_curves(2, 1)[0]
    with pytest.raises(ValueError, match=r"points: expected at least 10 .* got 8"):
        fit_learning_coefficient(curve, "tempered_loss", loss_min=None, decades=3.0, points=8)
    assert fit_learning_coefficient(curve, "tempered_loss", loss_min=None, decades=3.0, points=10).details.num_runs == 2
    assert fit_learning_coefficient(curve, "tempered_loss", loss_min=0.0, decades=3.0, points=6).details.num_runs == 2
    with pytest.raises(ValueError, match=r"points: expected at least 6 .* got 5"):
        fit_learning_coefficient(curve, "tempered_loss", loss_min=0.0, decades=3.0, points=5)


def test_where_the_windows_halves_disagree_on_m_lambdas_error_carries_both():
    """A curve t E_t[L] flat at 1/2 (m = 1) up to t = 1e6 and falling like m = 2's -1 / log t above it: the lower half
    of t = 1e2 .. 1e10 chooses m = 1, the rest m = 2, so m is not identifiable and both are candidates; lambda's
    standard error is then sqrt(s^2 + (lambda_1 - lambda_2)^2 / 2), s the runs' (here 1e-5, against a spread of
    0.05 between the two m's readings)."""
    import math

    t = np.logspace(2, 10, 200)
    lt = np.log(t)
    exact = np.where(t < 1e6, 0.5, 0.5 - 1.0 / lt + 1.0 / np.log(1e6))
    slope = exact + 1e-4 * np.random.default_rng(0).normal(size=(8, len(t)))
    F = np.cumsum(np.concatenate([np.zeros((8, 1)), 0.5 * (slope[:, 1:] + slope[:, :-1]) * np.diff(lt)], 1), 1)
    fit = fit_learning_coefficient(TemperedCurve(np.tile(t, (8, 1)), F, slope / t, np.zeros(8), 0), "tempered_loss",
                                   decades=8)
    d = fit.details
    assert fit.m is None and d.m_candidates == (1, 2), (d.m_candidates, fit.m_reason)
    chosen = 1 if fit.lambda_ == d.lambda_by_m[1] else 2
    assert fit.lambda_ == d.lambda_by_m[chosen] and d.lambda_se_runs == d.lambda_se_by_m[chosen] < 1e-4
    spread = d.lambda_by_m[2] - d.lambda_by_m[1]
    assert abs(spread) > 0.02
    assert math.isclose(fit.se, math.sqrt(d.lambda_se_runs ** 2 + spread ** 2 / 2), rel_tol=1e-12)
