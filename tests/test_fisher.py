import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu as S
from slt_relu.fisher import empirical_fisher_information, feature_jacobian, fisher_null_space, rank_bound
from slt_relu.inputs import Quadrature, expectation_rule
from slt_relu.degenerate import box_excess_count, excess_counts, generic_crossing_params, make_degenerate

GAUSS = S.Gaussian(1.0, 2, cells=48)


def dense_fisher(p, rule, sigma=1.0):
    """Independent: jax.jacfwd of forward w.r.t. the flat parameters, then J^T W J in NumPy."""
    d, n_in = p.w.shape
    J = jax.jacfwd(lambda flat: S.forward(S.from_flat(flat, d, n_in), rule.points))(S.to_flat(p))
    J = np.asarray(J)
    return (J * np.asarray(rule.weights)[:, None]).T @ J / sigma**2


def test_feature_jacobian_matches_autodiff(key):
    p = S.init_params(key, 4, 3)
    x = jax.random.normal(jax.random.PRNGKey(3), (3,))
    auto = jax.grad(lambda flat: S.forward(S.from_flat(flat, 4, 3), x))(S.to_flat(p))
    np.testing.assert_allclose(feature_jacobian(p, x), auto, rtol=1e-12)


@pytest.mark.parametrize("n_in,dist", [(1, S.UniformBox(1.5, 1)), (2, GAUSS)])
def test_fisher_dense_vs_autodiff_jit_and_vmap(key, n_in, dist):
    p = S.init_params(key, 3, n_in)
    I = S.fisher_information(p, dist, 0.8)
    rule = expectation_rule(dist, p)
    np.testing.assert_allclose(I, dense_fisher(p, rule, 0.8), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jax.jit(S.fisher_information)(p, dist, 0.8), I, rtol=1e-10, atol=1e-12)
    batch = jax.vmap(lambda k: S.init_params(k, 3, n_in))(jax.random.split(key, 3))
    ranks = jax.vmap(lambda q: S.fisher_rank(q, dist))(batch)
    loop = [int(np.linalg.matrix_rank(dense_fisher(jax.tree.map(lambda a: a[i], batch),
                                                   expectation_rule(dist, jax.tree.map(lambda a: a[i], batch))),
                                      tol=1e-10)) for i in range(3)]
    np.testing.assert_array_equal(ranks, loop)


def test_example_3_2_fisher_block():
    ex = S.truths.get("dslt3_example_3_2", theta0=1.0)
    assert abs(ex.sigma**2 - 0.25) < 1e-15
    for alpha in (0.3, 1.0, 2.5):
        p = ex.model.embed(jnp.array([alpha, 1 / alpha]))
        I = S.fisher_information(p, ex.inputs, ex.sigma, free=ex.model.free)
        np.testing.assert_allclose(I, [[2 / alpha**2, 2], [2, 2 * alpha**2]], rtol=1e-12)
        acc = S.null_accounting(p, ex.inputs, ex.sigma, free=ex.model.free)
        assert (acc.rank, acc.generator_rank, acc.excess) == (1, 1, 0)
        # the null direction is the scaling generator (w, -q)
        v = np.array([alpha, -1 / alpha]) / np.hypot(alpha, 1 / alpha)
        assert abs(abs(acc.null_basis[:, 0] @ v) - 1) < 1e-12


@pytest.mark.parametrize("width", [1, 2, 3, 5, 8])
def test_generic_rank_is_bound_and_generators_are_null(width):
    p = generic_crossing_params(jax.random.PRNGKey(width), width, 2, 1.0)
    acc = S.null_accounting(p, GAUSS)
    assert acc.rank == rank_bound(width, 2) == S.num_params(width, 2) - width
    assert acc.generator_rank == width and acc.excess == 0 and acc.excess_basis.shape == (acc.num_params, 0)
    assert np.all(acc.generator_residuals < 1e-12 * acc.spectrum[0])
    assert int(S.fisher_rank(p, GAUSS)) == acc.rank
    # v_i is in the null space of I: grad f . v_i = 0 at every point
    G = S.scaling_generators(p)
    J = jax.vmap(feature_jacobian, (None, 0))(p, GAUSS.sample(jax.random.PRNGKey(0), 100))
    assert float(jnp.abs(J @ G.T).max()) < 1e-12


def test_scaling_generator_layout():
    p = S.make_params([[1, 2], [3, 4]], [5, 6], [7, 8], 9)
    G = np.asarray(S.scaling_generators(p))
    np.testing.assert_array_equal(G, [[1, 2, 0, 0, 5, 0, -7, 0, 0], [0, 0, 3, 4, 0, 6, 0, -8, 0]])


@pytest.mark.parametrize("case", list(excess_counts(2)))
def test_hand_counted_excess(case):
    """Node 0 made degenerate in a generic width-4 network; counts derived in excess_counts' docstring."""
    dist = S.UniformBox(1.0, 2) if case.endswith("on_box") else GAUSS
    base = generic_crossing_params(jax.random.PRNGKey(7), 4, 2, 1.0)
    p = make_degenerate(case, base, dist)
    acc = S.null_accounting(p, dist)
    want = {"q_zero": 2, "w_zero_b_positive": 1, "shared_boundary": 3, "dead_node": 3,
            "inactive_on_box": 3, "active_on_box": 1}[case]
    assert want == excess_counts(2)[case]
    assert acc.excess == want and acc.excess_basis.shape[1] == want
    assert acc.rank == rank_bound(4, 2) - want
    # excess directions are null and orthogonal to every generator
    I = np.asarray(S.fisher_information(p, dist))
    assert np.abs(I @ acc.excess_basis).max() < 1e-10 * acc.spectrum[0]
    assert np.abs(np.asarray(S.scaling_generators(p)) @ acc.excess_basis).max() < 1e-10


@pytest.mark.parametrize("call, match", [
    (lambda: excess_counts(0), "n_in: expected a positive integer"),
    (lambda: make_degenerate("no_such_case", S.truths.m_symmetric(3), GAUSS), "case: expected one of"),
    (lambda: make_degenerate("active_on_box", S.truths.m_symmetric(3), GAUSS), "inputs: expected a UniformBox"),
    (lambda: box_excess_count(S.truths.m_symmetric(3), -1.0), "half_width: expected a positive finite number"),
    (lambda: generic_crossing_params(jax.random.PRNGKey(0), 0, 2), "width: expected a positive integer"),
])
def test_degenerate_networks_refuse_bad_input_in_one_line(call, match):
    with pytest.raises(ValueError, match=f"^{match}") as err:
        call()
    assert "\n" not in str(err.value)


def test_q_zero_lowers_rank_by_n_in():
    for n_in, dist in ((1, S.Gaussian(1.0, 1)), (2, GAUSS)):
        p = generic_crossing_params(jax.random.PRNGKey(1), 3, n_in, 1.0)
        r0 = int(S.fisher_rank(p, dist))
        r1 = int(S.fisher_rank(p._replace(q=p.q.at[1].set(0.0)), dist))
        assert r0 - r1 == n_in


def test_box_hand_count_for_iid_parameters():
    """Nodes inactive / fully active on the box, counted from the parameters, match the measured excess."""
    box = S.UniformBox(1.0, 2)
    for seed in range(8):
        p = S.init_params(jax.random.PRNGKey(seed), 4, 2)
        assert S.null_accounting(p, box).excess == box_excess_count(p, 1.0)


def test_rank_invariant_under_permutation_and_rescaling(key):
    t = S.truths.m_symmetric(4)
    assert int(S.fisher_rank(t, GAUSS)) == rank_bound(4, 2)
    lam = jnp.array([0.5, 2.0, 3.0, 0.25])
    perm = jnp.array([3, 1, 0, 2])
    moved = S.TwoLayer((lam[:, None] * t.w)[perm], (lam * t.b)[perm], (t.q / lam)[perm], t.c)
    assert int(S.fisher_rank(moved, GAUSS)) == int(S.fisher_rank(t, GAUSS))
    assert S.null_accounting(moved, GAUSS).excess == 0


def test_empirical_fisher_and_float32(key):
    t = S.truths.m_symmetric(3)
    x = S.UniformBox(1.0, 2).sample(key, 500)
    In = empirical_fisher_information(t, x, 0.5)
    J = np.asarray(jax.vmap(feature_jacobian, (None, 0))(t, x))
    np.testing.assert_allclose(In, J.T @ J / 500 / 0.25, rtol=1e-10)
    assert int(S.fisher_rank(t, Quadrature.from_samples(x))) == 10
    t32 = S.truths.m_symmetric(3, dtype=jnp.float32)
    assert S.fisher_information(t32, GAUSS).dtype == jnp.float32
    assert int(S.fisher_rank(t32, GAUSS)) == 10
    assert S.fisher_information(t32, S.UniformBox(1.0, 2)).dtype == jnp.float32
    assert int(S.fisher_rank(t32, S.UniformBox(1.0, 2))) == 10


def test_free_mask_checked():
    p = S.truths.m_symmetric(3)
    with pytest.raises(ValueError, match="free: expected a boolean mask of shape \\(13,\\)"):
        S.fisher_information(p, GAUSS, free=np.ones(4, bool))


def test_null_space_is_orthonormal_and_null():
    t = S.truths.m_symmetric(3)
    N = fisher_null_space(t, GAUSS)
    assert N.shape == (13, 3)
    np.testing.assert_allclose(N.T @ N, np.eye(3), atol=1e-12)
    I = np.asarray(S.fisher_information(t, GAUSS))
    assert np.abs(I @ N).max() < 1e-12 * np.abs(I).max()


def test_null_accounting_refuses_parameters_whose_fisher_overflows():
    """A weight so large that its products overflow gives an inf / NaN Jacobian: one ValueError naming params,
    not numpy's 'SVD did not converge' (the property tests found q = 2.3e307)."""
    ex = S.truths.get("dslt3_example_3_2", theta0=0.2)
    huge = ex.truth._replace(q=jnp.full_like(ex.truth.q, 1.7e308))          # q x overflows for |x| > 1.06
    with pytest.raises(ValueError, match="params: expected parameters at which the Fisher information is finite"):
        S.null_accounting(huge, ex.inputs, ex.sigma)
    assert S.null_accounting(ex.truth, ex.inputs, ex.sigma).rank >= 1
