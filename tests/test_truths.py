import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import slt_relu as S


@pytest.mark.parametrize("m", [2, 3, 4, 5, 6])
def test_m_symmetric_geometry(m):
    t = S.truths.m_symmetric(m, bias=-0.3, q=1.5, c=0.2)
    w = np.asarray(t.w)
    assert w.shape == (m, 2)
    np.testing.assert_allclose(w[0], [math.cos(math.pi / m), math.sin(math.pi / m)], atol=1e-15)
    for k in range(m):  # node k is node 0 rotated clockwise by 2 pi k / m
        a = -2 * math.pi * k / m
        rot = np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
        np.testing.assert_allclose(w[k], rot @ w[0], atol=1e-14)
    np.testing.assert_allclose(w.sum(0), 0.0, atol=1e-14)  # the weights annihilate
    np.testing.assert_allclose(t.b, -0.3)
    np.testing.assert_allclose(t.q, 1.5)
    assert float(t.c) == 0.2


def test_m3_third_node_points_left():
    np.testing.assert_allclose(S.truths.m_symmetric(3).w[2], [-1.0, 0.0], atol=1e-15)


def test_examples_have_k_zero_at_truth_and_described_true_sets():
    for name in S.truths.names():
        ex = S.truths.get(name)
        assert float(S.population_loss(ex.truth, ex.truth, ex.inputs, ex.sigma)) == 0.0
        if ex.true_set is not None:
            K = lambda th: S.population_loss(ex.model.embed(th), ex.truth, ex.inputs, ex.sigma)
            for curve in ex.true_set(((-1.0, 2.0), (-1.0, 2.0)), 25):
                assert float(jnp.max(jax.vmap(K)(jnp.asarray(curve)))) < 1e-20


def test_example_3_3_orientation_reversal_is_equioutput():
    """relu(x-1) + relu(-x-1) + 2 == relu(-x+1) + relu(x+1) (DSLT3 Example 3.3)."""
    ex = S.truths.get("dslt3_example_3_3")
    rev = S.make_params([[-1.0], [1.0]], [1.0, 1.0], [1.0, 1.0], 0.0)
    assert float(S.population_loss(rev, ex.truth, ex.inputs)) < 1e-28


def test_unknown_example_and_option():
    with pytest.raises(ValueError, match="truth 'nope': expected one of"):
        S.truths.get("nope")
    with pytest.raises(ValueError, match="unknown option"):
        S.truths.get("dslt3_example_3_4", theta0=1.0)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), width=st.integers(1, 5))
def test_symmetries_preserve_k_and_rank(seed, width):
    """Property: any permutation and positive rescaling leaves K and the Fisher rank unchanged.

    Boundaries are placed within one std of the origin: a node whose boundary lies far in the
    Gaussian tail has eigenvalues near the rank cut, and rescaling (which changes the metric)
    can move them across it; that is numerical rank, not a symmetry failure."""
    from slt_relu.degenerate import generic_crossing_params

    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    p = generic_crossing_params(k1, width, 1, 2.0)
    t = S.truths.get("dslt3_example_3_3")
    lam = jnp.exp(jax.random.uniform(k2, (width,), minval=-2, maxval=2))
    perm = jax.random.permutation(k3, width)
    moved = S.TwoLayer((lam[:, None] * p.w)[perm], (lam * p.b)[perm], (p.q / lam)[perm], p.c)
    dist = S.Gaussian(1.0, 1)
    a, b = S.population_loss(p, t.truth, dist), S.population_loss(moved, t.truth, dist)
    assert abs(float(a - b)) <= 1e-9 * max(float(a), 1e-12)
    assert int(S.fisher_rank(p, dist)) == int(S.fisher_rank(moved, dist))
