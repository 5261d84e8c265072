import jax
import numpy as np
import pytest
from scipy import integrate, stats

import slt_relu as S
from slt_relu.inputs import Quadrature, expectation_rule
from slt_relu.inputs import tensor_rule_2d


def test_uniform_rule_exact_for_piecewise_quadratics(key):
    """Integrand (f - f0)^2 is piecewise quadratic: the breakpoint-split rule must equal scipy's quad."""
    p = S.init_params(key, 4, 1)
    t = S.init_params(jax.random.PRNGKey(1), 3, 1)
    box = S.UniformBox(1.7, 1)
    rule = expectation_rule(box, p, t)
    g = lambda x: float((S.forward(p, np.array([x])) - S.forward(t, np.array([x]))) ** 2)
    bps = sorted(float(x) for x in np.concatenate([-p.b / p.w[:, 0], -t.b / t.w[:, 0]]) if abs(x) < 1.7)
    edges = [-1.7] + bps + [1.7]
    exact = sum(integrate.quad(g, a, b, epsabs=0, epsrel=1e-12)[0] for a, b in zip(edges[:-1], edges[1:])) / 3.4
    got = float(np.sum(rule.weights * (S.forward(p, rule.points) - S.forward(t, rule.points)) ** 2))
    assert abs(got - exact) < 1e-12 * max(1, exact)
    assert abs(float(rule.weights.sum()) - 1.0) < 1e-14


def test_gaussian_1d_rule_matches_adaptive_quadrature(key):
    p = S.init_params(key, 3, 1)
    g = S.Gaussian(1.3, 1)
    rule = expectation_rule(g, p)
    f = lambda x: float(S.forward(p, np.array([x])) ** 2) * stats.norm.pdf(x, scale=1.3)
    bps = sorted(float(x) for x in -p.b / p.w[:, 0])
    edges = [-20.0] + bps + [20.0]
    exact = sum(integrate.quad(f, a, b, epsabs=0, epsrel=1e-12, limit=200)[0] for a, b in zip(edges[:-1], edges[1:]))
    got = float(np.sum(rule.weights * S.forward(p, rule.points) ** 2))
    assert abs(got - exact) < 1e-12 * exact


@pytest.mark.parametrize("w,b,want", [
    ([1.0, 0.0], 0.0, 1 / 12),            # E[relu(x1)^2] / 2 = (1/6) / 2
    ([1.0, 1.0], 0.0, 1 / 6),             # E[(x1+x2)^2] / 4
    ([1.0, 1.0], -0.5, 0.10546875 / 2),   # s = x1+x2 has density (2-|s|)/4: int_.5^2 (s-.5)^2 (2-s)/4 ds / 2
    ([0.0, 1.0], 0.3, 1.3**3 / 12),       # int_{-.3}^1 (y+.3)^2 dy / 2 / 2
    ([1e-17, -1.0], 0.2, 1.2**3 / 12),    # a nearly horizontal line
    ([-1.0, -1e-16], -0.3, 0.7**3 / 12),  # a nearly vertical line
])
def test_uniform_2d_rule_exact_closed_forms(w, b, want):
    """K of one node against the zero network on [-1, 1]^2, by hand."""
    p = S.make_params([w], b, 1.0, 0.0)
    zero = S.make_params([[1.0, 0.0]], 0.0, 0.0, 0.0)
    assert abs(float(S.population_loss(p, zero, S.UniformBox(1.0, 2))) - want) < 1e-14


def test_uniform_2d_rule_weights_and_convergence():
    """The trapezoid rule's weights sum to 1 for random networks, and the tensor rule converges to it."""
    from slt_relu.inputs import box_rule_2d

    box = S.UniformBox(1.0, 2)
    t = S.truths.m_symmetric(3)
    flats = jax.random.normal(jax.random.PRNGKey(0), (500, 13))
    sums = jax.vmap(lambda f: box_rule_2d(1.0, S.from_flat(f, 3, 2), t).weights.sum())(flats)
    assert float(np.abs(np.asarray(sums) - 1).max()) < 1e-13
    p = S.init_params(jax.random.PRNGKey(1), 3, 2)
    exact = float(S.population_loss(p, t, box))
    errs = [abs(float(S.population_loss(p, t, tensor_rule_2d(box, cells=c))) - exact) for c in (64, 256)]
    assert errs[1] < errs[0] / 4 and errs[1] < 1e-5 * exact


@pytest.mark.parametrize("dist", [S.Gaussian(1.0, 2)])
def test_2d_rule_error_bounded_by_finer_rule(dist):
    """The default 96 x 96-cell Gaussian rule against a 4x finer one: K within 1e-3 relative, Fisher within 1e-2."""
    t = S.truths.m_symmetric(3)
    fine = tensor_rule_2d(dist, cells=4 * dist.cells)
    for seed in range(3):
        p = S.init_params(jax.random.PRNGKey(seed), 3, 2)
        k0, k1 = S.population_loss(p, t, dist), S.population_loss(p, t, fine)
        assert abs(k0 - k1) < 1e-3 * k1
        i0, i1 = S.fisher_information(p, dist), S.fisher_information(p, fine)
        assert np.abs(i0 - i1).max() < 1e-2 * np.abs(i1).max()
    assert abs(float(fine.weights.sum()) - 1.0) < 1e-12


def test_sampling_moments(key):
    x = S.UniformBox(2.0, 2).sample(key, 20000)
    assert x.shape == (20000, 2) and float(abs(x).max()) <= 2.0
    np.testing.assert_allclose(np.var(x, axis=0), 4.0 / 3.0, rtol=0.05)
    y = S.Gaussian(0.5, 3).sample(key, 20000)
    np.testing.assert_allclose(np.std(y, axis=0), 0.5, rtol=0.03)


def test_high_dimension_needs_a_quadrature(key):
    p = S.init_params(key, 2, 3)
    with pytest.raises(ValueError, match="n_in = 3"):
        S.population_loss(p, p, S.Gaussian(1.0, 3))
    rule = Quadrature.from_samples(S.Gaussian(1.0, 3).sample(key, 100))
    assert float(S.population_loss(p, p, rule)) == 0.0


def test_bad_distribution_arguments():
    with pytest.raises(ValueError, match="half_width: expected a positive number"):
        S.UniformBox(-1.0, 2)
    with pytest.raises(ValueError, match="n_in: expected a positive integer"):
        S.Gaussian(1.0, 0)
