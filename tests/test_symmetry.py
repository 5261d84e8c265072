"""Symmetries as operations (Petzka et al. 2020; DSLT3): identities, reductions, equivalence."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import slt_relu as S
from slt_relu.classify import NOT_IN_W0
from slt_relu.network import coordinate_names
from slt_relu.symmetry import annihilating_subsets, merge_nodes, random_symmetry, split_node
from slt_relu.network import make_params
from slt_relu.truths import m_symmetric


def sampled_gap(p1, p2, n_in, seed=0, n=400, spread=4.0):
    x = np.random.default_rng(seed).normal(scale=spread, size=(n, n_in))
    return float(jnp.max(jnp.abs(S.forward(p1, x) - S.forward(p2, x))))


def petzka_figure_1():
    """x_+ - (-x)_+ + y_+ - (-y)_+ - (x+y)_+ + (-x-y)_+ = x + y - (x + y) = 0."""
    w = [[1, 0], [-1, 0], [0, 1], [0, -1], [1, 1], [-1, -1]]
    return make_params(w, 0.0, [1, -1, 1, -1, -1, 1], 0.0)


def test_petzka_figure_1_reduces_to_the_zero_network():
    p = petzka_figure_1()
    assert sampled_gap(p, make_params(np.zeros((0, 2)), [], [], 0.0), 2) < 1e-12
    red = S.reduce(p)
    assert red.params.width == 0 and np.all(red.linear == 0) and float(red.params.c) == 0.0
    assert S.are_equivalent(p, make_params([[1.0, 0.0]], 0.0, 0.0, 0.0))       # a dead node: also zero
    assert not S.are_equivalent(p, make_params([[1.0, 0.0]], 0.0, 1e-3, 0.0))


def test_petzka_figure_2_pair_is_psi_123():
    """x_+ + y_+ + (-x-y)_+ = (-x)_+ + (-y)_+ + (x+y)_+; psi^{1,2,3} maps one to the other."""
    p1 = make_params([[1, 0], [0, 1], [-1, -1]], 0.0, 1.0, 0.0)
    p2 = make_params([[-1, 0], [0, -1], [1, 1]], 0.0, 1.0, 0.0)
    assert annihilating_subsets(p1) == [(0, 1, 2)]
    flipped = S.reverse_orientation(p1, [0, 1, 2])
    for a, b in zip(flipped, p2):
        np.testing.assert_allclose(a, b, atol=1e-15)
    assert S.are_equivalent(p1, p2) and sampled_gap(p1, p2, 2) < 1e-12
    # both are irreducible with pairwise different boundaries (R1-R3 change nothing)
    assert S.reduce(p1).params.width == 3 and np.all(S.reduce(p1).linear == 0)
    # reversing one node of them is not an equioutput transformation
    assert not S.are_equivalent(p1, p1._replace(w=p1.w.at[0].multiply(-1)))


def test_dslt3_example_3_3_orientation_reversal():
    ex = S.truths.get("dslt3_example_3_3")
    flipped = S.reverse_orientation(ex.truth, [0, 1])
    want = make_params([[-1.0], [1.0]], [1.0, 1.0], [1.0, 1.0], 0.0)        # relu(-x+1) + relu(x+1)
    for a, b in zip(flipped, want):
        np.testing.assert_allclose(a, b, atol=1e-15)
    assert S.are_equivalent(ex.truth, want)
    assert float(S.population_loss(want, ex.truth, ex.inputs, ex.sigma)) < 1e-28


@pytest.mark.parametrize("m", [3, 4, 5, 6])
def test_m_symmetric_reversing_all_nodes(m):
    truth = m_symmetric(m, bias=-0.3, q=1.3, c=0.2)
    flipped = S.reverse_orientation(truth, range(m))
    np.testing.assert_allclose(float(flipped.c), 0.2 + m * 1.3 * -0.3, atol=1e-14)   # c' = c + sum_i q_i b_i
    assert S.are_equivalent(truth, flipped)
    assert sampled_gap(truth, flipped, 2) < 1e-12
    assert float(S.population_loss(flipped, truth, S.UniformBox(1.0, 2))) < 1e-26
    assert tuple(range(m)) in annihilating_subsets(truth)


def test_annihilating_subsets_of_m_symmetric_truths_by_hand():
    """Unit vectors at angles pi/m - 2 pi k/m: a subset sums to zero iff it is a union of
    rotation-symmetric subsets: m = 4: the two opposite pairs and all four; m = 6: three
    opposite pairs, two triangles, their unions (pairs of pairs, all six)."""
    assert annihilating_subsets(m_symmetric(3)) == [(0, 1, 2)]
    assert annihilating_subsets(m_symmetric(4)) == [(0, 2), (1, 3), (0, 1, 2, 3)]
    six = annihilating_subsets(m_symmetric(6))
    assert six == [(0, 3), (1, 4), (2, 5), (0, 2, 4), (1, 3, 5), (0, 1, 3, 4), (0, 2, 3, 5), (1, 2, 4, 5),
                   (0, 1, 2, 3, 4, 5)]


def test_a_non_annihilating_subset_raises_the_residual():
    truth = m_symmetric(3)
    with pytest.raises(ValueError, match=r"nodes \[0, 1\] do not annihilate: sum_i q_i w_i over them is"):
        S.reverse_orientation(truth, [0, 1])
    with pytest.raises(ValueError, match="node indices must lie in"):
        S.reverse_orientation(truth, [5])


def test_permute_and_rescale_keep_K_and_fisher_rank_and_check_arguments():
    box = S.UniformBox(1.0, 2)
    truth = m_symmetric(3)
    p = S.init_params(jax.random.PRNGKey(3), 3, 2)
    q = S.rescale(S.permute(p, [2, 0, 1]), jnp.array([0.5, 2.0, 3.0]))
    np.testing.assert_allclose(S.population_loss(p, truth, box), S.population_loss(q, truth, box), rtol=1e-12)
    assert int(S.fisher_rank(p, box)) == int(S.fisher_rank(q, box))
    with pytest.raises(ValueError, match="lambdas: expected positive"):
        S.rescale(p, jnp.array([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match="perm: expected a permutation of range"):
        S.permute(p, [0, 0, 1])
    # under jit and vmap
    batch = jax.vmap(lambda k: S.init_params(k, 3, 2))(jax.random.split(jax.random.PRNGKey(1), 4))
    out = jax.jit(lambda b: S.rescale(b, jnp.array([2.0, 3.0, 4.0])))(batch)
    np.testing.assert_allclose(jax.vmap(S.forward, (0, None))(out, jnp.ones((5, 2))),
                               jax.vmap(S.forward, (0, None))(batch, jnp.ones((5, 2))), rtol=1e-12)


def test_split_and_merge_nodes_on_one_boundary():
    base = make_params([[1.0, 0.5], [0.0, 0.0]], [-0.2, 0.7], [1.5, 2.0], 0.1)   # node 1: w = 0, constant 1.4
    split = split_node(base, 0, 1, fraction=0.3)
    assert sampled_gap(base, split, 2) < 1e-12
    np.testing.assert_allclose(split.q, [0.45, 1.05])
    np.testing.assert_allclose(float(split.c), 0.1 + 2.0 * 0.7)
    merged = merge_nodes(S.rescale(split, jnp.array([1.0, 2.5])), 0, 1)
    assert sampled_gap(base, merged, 2) < 1e-12
    np.testing.assert_allclose(merged.q, [1.5, 0.0], atol=1e-14)
    with pytest.raises(ValueError, match="into: node 0 must be degenerate"):
        split_node(split, 1, 0)
    opposite = make_params([[1.0, 0.5], [-2.0, -1.0]], [-0.2, 0.4], [1.0, 1.0])
    with pytest.raises(ValueError, match="opposite active sides"):
        merge_nodes(opposite, 0, 1)


def test_reduce_r1_r2_r3_by_hand():
    """relu(x) + 2 relu(2x) + 3 relu(-x) + q relu(0 x + 1.5) + 0 relu(x - 7):
    R1: the w = 0 node is the constant 1.5 q, the q = 0 node goes; R2: relu(x) + 2 relu(2x) = 5 relu(x);
    R3: 5 relu(x) + 3 relu(-x) = 8 relu(x) - 3 x."""
    p = make_params([[1.0], [2.0], [-1.0], [0.0], [1.0]], [0.0, 0.0, 0.0, 1.5, -7.0], [1.0, 2.0, 3.0, 2.0, 0.0], 0.5)
    red = S.reduce(p)
    assert red.params.width == 1
    np.testing.assert_allclose(red.params.w, [[1.0]])
    np.testing.assert_allclose(red.params.q, [8.0])
    np.testing.assert_allclose(red.linear, [-3.0])
    np.testing.assert_allclose(float(red.params.c), 0.5 + 3.0)
    x = np.linspace(-5, 5, 101)[:, None]
    np.testing.assert_allclose(red(x), S.forward(p, x), atol=1e-12)
    np.testing.assert_allclose(S.forward(red.as_two_layer(), x), S.forward(p, x), atol=1e-12)


def annihilating_network(seed, d, n_in):
    """A random network whose nodes 0..k-1 (k >= 2) annihilate (q w of the last one cancels the rest)."""
    rng = np.random.default_rng(seed)
    w, b = rng.normal(size=(d, n_in)), rng.normal(size=d)
    q = rng.choice([-1.0, 1.0], d) * rng.uniform(0.3, 2.0, d)
    k = int(rng.integers(2, d + 1)) if d >= 2 else 0
    if k:
        w[k - 1] = -(q[: k - 1, None] * w[: k - 1]).sum(0) / q[k - 1]
    return make_params(w, b, q, rng.normal()), k


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), d=st.integers(1, 5), n_in=st.integers(1, 3))
def test_equivalent_after_symmetries_and_not_after_a_perturbation(seed, d, n_in):
    p, k = annihilating_network(seed, d, n_in)
    assert S.reduce(p).params.width == d                      # generic: irreducible
    if k:
        assert tuple(range(k)) in annihilating_subsets(p, tol=1e-9)
    moved, how = random_symmetry(jax.random.PRNGKey(seed % 1000), p, tol=1e-9)
    assert S.are_equivalent(p, moved, tol=1e-9), how
    assert sampled_gap(p, moved, n_in, seed) < 1e-9
    flat = np.asarray(S.to_flat(moved))
    coord = seed % len(flat)
    bumped = flat.copy()
    bumped[coord] += 1e-3 * (1 + abs(flat[coord]))
    other = S.from_flat(jnp.asarray(bumped), d, n_in)
    assert not S.are_equivalent(p, other, tol=1e-9), coordinate_names(d, n_in)[coord]


def test_are_equivalent_needs_matching_inputs():
    with pytest.raises(ValueError, match="p2: expected n_in = 2"):
        S.are_equivalent(m_symmetric(3), make_params([[1.0]], 0.0, 1.0))


def test_near_misses_are_not_equivalent_in_float32_and_float64():
    f32 = jnp.float32
    one = make_params([[1.0]], 0.0, 1.0, 0.0, dtype=f32)
    assert not S.are_equivalent(one, make_params([[1.0]], -0.01, 1.0, 0.0, dtype=f32))
    assert not S.are_equivalent(make_params([[1.0, 0.0]], 0.0, 1.0, dtype=f32), make_params([[1.0, 0.01]], 0.0, 1.0, dtype=f32))
    p = make_params([[1.0], [1.0], [1.0]], [0.0, -0.008, -0.016], 1.0, 0.0, dtype=f32)
    assert S.are_equivalent(p, S.permute(p, [1, 0, 2]))
    assert not S.are_equivalent(make_params([[1.0]], 0.0, 1.0, 0.0), make_params([[1.0]], -3e-7, 1.0, 0.0))
    # a large output bias does not hide a small node
    assert not S.are_equivalent(make_params([[1.0]], 0.0, 0.01, 100.0), make_params([[1.0]], 0.0, 0.0, 100.0))


def test_width_zero_networks():
    z = make_params(np.zeros((0, 2)), [], [], 0.5)
    assert annihilating_subsets(z) == []
    assert S.are_equivalent(z, make_params([[1.0, 0.0]], -1.0, 0.0, 0.5))
    assert S.reduce(petzka_figure_1()).as_two_layer().width == 0
    got = S.classify_phase(z, m_symmetric(3))
    assert got.label == NOT_IN_W0 and got.structure.truth == ((0, 0),) * 3 and got.distance == np.inf
