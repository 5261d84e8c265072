"""Deep ReLU networks: regions, local affine maps, dual space, functional dimension."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu as S
from slt_relu.mlp import activation_patterns, dual_points, flatten_mlp, from_two_layer, local_affine_maps, unflatten_mlp
from slt_relu.regions import (affine_map_between, cluster_affine_maps, count_regions_box_exact, count_regions_grid,
                              count_regions_segment, functional_dimension_bound, kmeans, parameter_jacobian,
                              regions_along_segment)
from slt_relu.mlp import Dense

XOR = S.MLP((Dense(jnp.array([[1.0, 1.0], [1.0, 1.0]]), jnp.array([1.0, 0.0])),
             Dense(jnp.array([[1.0, -2.0]]), jnp.array([-1.0]))))      # relu(x+y+1) - 2 relu(x+y) - 1


def test_xor_network_regions_by_hand():
    """Patterns (top, bottom): (0,0) for x+y < -1, (1,0) for -1 < x+y < 0, (1,1) for x+y > 0;
    (0,1) would need x+y > 0 and x+y < -1: empty.  Three regions on any segment across both
    lines, in the box (two parallel lines: 1 + 2), and on a fine grid."""
    seg = regions_along_segment(XOR, [-2.0, -2.0], [2.0, 2.0])
    assert seg.count == 3
    np.testing.assert_allclose(seg.breakpoints, [0.375, 0.5])           # x+y = -1 at t = 3/8, x+y = 0 at 1/2
    assert [tuple(p) for p in seg.patterns] == [(False, False), (True, False), (True, True)]
    assert count_regions_segment(XOR, [-2.0, 2.0], [2.0, -2.0]) == 1      # along x + y = 0, the bottom boundary
    assert S.count_linear_regions(XOR, segment=([-2.0, -2.0], [2.0, 2.0])) == S.count_linear_regions(XOR, half_width=2.0) == 3
    assert count_regions_box_exact(XOR, 2.0) == 3
    assert count_regions_grid(XOR, 2.0, 101) == 3
    pats = np.asarray(activation_patterns(XOR, jax.random.normal(jax.random.PRNGKey(0), (5000, 2)) * 3))
    assert not np.any(~pats[:, 0] & pats[:, 1])                          # the fourth pattern never occurs


def test_local_affine_maps_equal_value_and_jacobian():
    for widths in [(2, 5, 1), (3, 8, 6, 2), (4, 7, 7, 7, 3)]:
        p = S.init_mlp(jax.random.PRNGKey(len(widths)), widths, bias_std=0.5)
        x = jax.random.normal(jax.random.PRNGKey(9), (64, widths[0]))
        W, b = local_affine_maps(p, x)
        f = S.mlp_forward(p, x)
        np.testing.assert_allclose(jnp.einsum("pij,pj->pi", W, x) + b, f, atol=1e-12)
        J = jax.jit(jax.vmap(jax.jacfwd(lambda z: S.mlp_forward(p, z))))(x)
        np.testing.assert_allclose(W, J, atol=1e-12)
        C = dual_points(p, x, output=widths[-1] - 1)
        np.testing.assert_allclose(C[:, :-1], W[:, -1, :])
    x = jnp.array([[1.0, 1.0], [-0.7, 0.2], [-2.0, -1.0]])
    np.testing.assert_allclose(dual_points(XOR, x), [[-1, -1, 0], [1, 1, 0], [0, 0, -1]])


def test_two_layer_converts_to_mlp():
    tl = S.truths.m_symmetric(3, c=0.4)
    m = from_two_layer(tl)
    x = jax.random.normal(jax.random.PRNGKey(1), (50, 2))
    np.testing.assert_allclose(S.mlp_forward(m, x)[:, 0], S.forward(tl, x), atol=1e-14)
    assert m.widths == (2, 3, 1) and m.num_hidden == 3


def test_grid_count_converges_to_the_exact_arrangement_count():
    """One hidden layer: the exact count is the line arrangement's; grid counts can only miss
    regions (lower bound) and the miss shrinks as the grid refines."""
    p = S.init_mlp(jax.random.PRNGKey(5), (2, 14, 1), bias_std=0.8)
    exact = count_regions_box_exact(p, 1.0)
    misses = [exact - count_regions_grid(p, 1.0, r) for r in (9, 17, 33, 65, 129, 513)]     # nested grids
    assert all(m >= 0 for m in misses)
    assert misses == sorted(misses, reverse=True) and misses[0] > 0 and misses[-1] == 0
    # exact along segments: the number of distinct lines crossed, plus one
    a, e = np.array([-1.0, -0.3]), np.array([1.0, 0.4])
    w, b = np.asarray(p.layers[0].w), np.asarray(p.layers[0].b)
    crossed = np.sum(np.sign(w @ a + b) != np.sign(w @ e + b))
    assert count_regions_segment(p, a, e) == crossed + 1


def test_exact_box_count_with_concurrent_lines():
    """Three lines through the origin and one away from it, all crossing the box: 1 + 4 + (3 - 1) at the
    origin + the crossings of the fourth line with the other three inside the box."""
    w = jnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, -1.0]])
    b = jnp.array([0.0, 0.0, 0.0, -0.5])
    p = S.MLP((Dense(w, b), Dense(jnp.ones((1, 4)), jnp.zeros(1))))
    # the fourth line x - y = 0.5 meets x = 0 at (0, -0.5), y = 0 at (0.5, 0), x + y = 0 at (0.25, -0.25)
    assert count_regions_box_exact(p, 1.0) == 1 + 4 + 2 + 3
    assert count_regions_grid(p, 1.0, 801) == 1 + 4 + 2 + 3


def test_regions_along_lines_grow_linearly_in_the_number_of_neurons():
    """Hanin & Rolnick (2019): along a line, E[#regions] grows about linearly in the number of neurons N.
    With He weights, N(0, 0.3^2) biases, n_in = 4, segments of length 4 through N(0, I) points, 30 lines
    per network size: fit (mean - 1) = s N through the origin; each size's mean must lie within
    3 standard errors + 15% of the fit, and the means must increase."""
    rng = np.random.default_rng(0)
    sizes, means, ses = [], [], []
    for n in (8, 16, 32):
        counts = []
        for k in range(30):
            p = S.init_mlp(jax.random.PRNGKey(100 * n + k), (4, n, n, n, 1), bias_std=0.3)
            a, d = rng.normal(size=4), rng.normal(size=4)
            d /= np.linalg.norm(d)
            counts.append(count_regions_segment(p, a - 2 * d, a + 2 * d))
        sizes.append(3 * n)
        means.append(np.mean(counts))
        ses.append(np.std(counts) / np.sqrt(len(counts)))
    N, m, se = map(np.array, (sizes, means, ses))
    s = np.sum(N * (m - 1)) / np.sum(N * N)
    assert np.all(np.abs(m - 1 - s * N) <= 3 * se + 0.15 * s * N), (m, s * N + 1, se)
    assert np.all(np.diff(m) > 0)


def test_kmeans_and_rebuilt_outputs():
    x = jnp.asarray(np.stack(np.meshgrid(np.linspace(-1, 1, 41), np.linspace(-1, 1, 41)), -1).reshape(-1, 2))
    got = cluster_affine_maps(jax.random.PRNGKey(0), XOR, x * 2, k=3)
    # three regions, three dual points: three clusters rebuild the network exactly
    assert got.rms_error < 1e-12 and got.sign_agreement == 1.0
    one = cluster_affine_maps(jax.random.PRNGKey(0), XOR, x * 2, k=1)
    assert one.rms_error > 0.1
    km = kmeans(jax.random.PRNGKey(2), jnp.array([[0.0, 0], [0.1, 0], [5, 5], [5.1, 5]]), 2)
    assert sorted(np.round(np.asarray(km.centres)[:, 0], 2).tolist()) == [0.05, 5.05]
    with pytest.raises(ValueError, match="k: expected 1 <= k <= 4"):
        kmeans(jax.random.PRNGKey(2), jnp.zeros((4, 2)), 5)


def test_affine_map_between_networks():
    """A network and its image under an invertible affine change of input coordinates x = A u + t:
    the dual points at matching inputs are related exactly by the map M = [[A, 0], [t^T, 1]]."""
    p = S.init_mlp(jax.random.PRNGKey(3), (2, 9, 9, 1), bias_std=0.4)
    A = jnp.array([[1.5, 0.3], [-0.2, 0.8]])
    t = jnp.array([0.1, -0.2])
    first = p.layers[0]
    q = p._replace(layers=(Dense(first.w @ A, first.w @ t + first.b),) + p.layers[1:])   # q(u) = p(A u + t)
    u = jax.random.normal(jax.random.PRNGKey(4), (500, 2))
    Cp, Cq = dual_points(p, u @ A.T + t), dual_points(q, u)
    M, resid = affine_map_between(Cp, Cq)
    assert resid < 1e-10
    np.testing.assert_allclose(M[:2, :2], A, atol=1e-8)


def test_functional_dimension_bound_and_reach():
    assert functional_dimension_bound((5, 5, 5, 5, 1)) == 96 - 15 == 81
    assert functional_dimension_bound((10, 10, 10, 10, 1)) == 341 - 30 == 311
    # a generic two-layer network reaches D - d with enough Gaussian points; the Jacobian is checked
    # against central finite differences
    p = S.init_mlp(jax.random.PRNGKey(6), (3, 6, 1), bias_std=0.5)
    z = jax.random.normal(jax.random.PRNGKey(7), (120, 3))
    assert S.functional_dimension(p, z) == functional_dimension_bound((3, 6, 1)) == 31 - 6
    theta = flatten_mlp(p)
    J = parameter_jacobian(p, z)
    h = 1e-6
    f = jax.jit(lambda th: S.mlp_forward(unflatten_mlp(th, p.widths), z).reshape(-1))
    for k in (0, 7, 20, 30):
        e = jnp.zeros_like(theta).at[k].set(h)
        np.testing.assert_allclose(J[:, k], (f(theta + e) - f(theta - e)) / (2 * h), atol=1e-6)
    # a dead neuron (w = 0, b < 0) loses its n_in + 2 directions except nothing to scale: bound - (n_in + 1)
    dead = p._replace(layers=(Dense(p.layers[0].w.at[0].set(0.0), p.layers[0].b.at[0].set(-1.0)), p.layers[1]))
    assert S.functional_dimension(dead, z) == 25 - (3 + 1)
    for widths in [(2, 4, 4, 1), (3, 5, 5, 5, 1), (4, 3, 1)]:
        q = S.init_mlp(jax.random.PRNGKey(8), widths, bias_std=0.3)
        zz = jax.random.normal(jax.random.PRNGKey(9), (4 * functional_dimension_bound(widths), widths[0]))
        assert S.functional_dimension(q, zz) <= functional_dimension_bound(widths)


def test_bad_arguments():
    with pytest.raises(ValueError, match="widths: expected at least two positive integers"):
        S.init_mlp(jax.random.PRNGKey(0), (3,))
    with pytest.raises(ValueError, match="x: expected a last axis of n_in = 2"):
        S.mlp_forward(XOR, jnp.zeros((4, 3)))
    with pytest.raises(ValueError, match="the exact box count is for one hidden layer"):
        count_regions_box_exact(S.init_mlp(jax.random.PRNGKey(0), (2, 3, 3, 1)), 1.0)
    with pytest.raises(ValueError, match=r"params.layers\[1\].w: expected 2 inputs"):
        activation_patterns(S.MLP((XOR.layers[0], Dense(jnp.ones((1, 3)), jnp.zeros(1)))), jnp.zeros((1, 2)))
