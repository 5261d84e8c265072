"""k-gon labels of TMS parameters: constructed k-gons, their symmetric copies and small perturbations keep
their label; large perturbations and irregular or non-convex polygons get "none"."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt_relu.tms import (NONE, TMSParams, label, label_name, label_names, make_kgon, permute_features, reflection,
                          refined_kgon, rotate, rotation)


def stack(params_list):
    return jax.tree.map(lambda *a: jnp.stack(a), *params_list)


def test_constructed_kgons_get_their_label():
    for c in (4, 5, 6, 8):
        cases = [(k, n_pos) for k in range(1, c + 1) for n_pos in sorted({0, c - k})]
        lab = label(stack([refined_kgon(c, k, n_pos) for k, n_pos in cases]))
        np.testing.assert_array_equal(lab.code, [k for k, _ in cases])
        np.testing.assert_array_equal(lab.k, [k for k, _ in cases])
        np.testing.assert_array_equal(lab.n_positive, [n for _, n in cases])
        assert np.all(lab.regular) and np.all(lab.convex)
    assert int(label(TMSParams(jnp.zeros((2, 5)), jnp.full(5, -0.1))).code) == 0       # no long column


def test_rotated_reflected_and_permuted_copies_keep_the_label():
    p = refined_kgon(6, 5, 1)
    rng = np.random.default_rng(0)
    copies = [rotate(p, rotation(t)) for t in np.linspace(-3, 3, 7)]
    copies += [rotate(p, reflection(t)) for t in (0.1, 1.2, 2.5)]
    copies += [permute_features(rotate(p, rotation(0.3)), rng.permutation(6)) for _ in range(4)]
    lab = label(stack(copies))
    assert lab.code.shape == (14,)
    np.testing.assert_array_equal(lab.code, 5)
    np.testing.assert_array_equal(lab.n_positive, 1)


@pytest.mark.parametrize("c, k, n_pos", [(6, 6, 0), (6, 5, 1), (6, 4, 0), (8, 8, 0), (8, 7, 0)])
def test_small_perturbations_keep_the_label(c, k, n_pos):
    """N(0, 0.02^2) on every coordinate (200 draws, one fixed key): the lengths move by ~0.03 against the
    threshold's margin of >= 0.5, the angles by ~1 degree against the tolerance of a quarter gap (>= 11
    degrees), the unused biases (1/(2c) >= 0.0625 from zero) by 0.02."""
    p = refined_kgon(c, k, n_pos)
    kW, kb = jax.random.split(jax.random.key(c * 10 + k))
    draws = TMSParams(p.W + 0.02 * jax.random.normal(kW, (200,) + p.W.shape),
                      p.b + 0.02 * jax.random.normal(kb, (200,) + p.b.shape))
    lab = label(draws)
    np.testing.assert_array_equal(lab.code, k)
    np.testing.assert_array_equal(lab.n_positive, n_pos)


def test_large_perturbations_and_broken_polygons_get_none():
    p = refined_kgon(6, 6)
    kW, kb = jax.random.split(jax.random.key(1))
    draws = TMSParams(p.W + jax.random.normal(kW, (200,) + p.W.shape), p.b + jax.random.normal(kb, (200,) + p.b.shape))
    # N(0, 1) noise: with this key 199 of 200 draws are "none" (the other happens to be a regular 5-gon)
    assert np.mean(np.asarray(label(draws).code) == NONE) >= 0.95
    W = np.asarray(p.W)
    half_gap = W.copy()
    half_gap[:, 0] = np.asarray(rotation(np.pi / 6)) @ W[:, 0]              # one column half a gap off
    missing = W.copy()
    missing[:, 2] *= 0.2                                                    # 5 long columns at hexagon angles
    dent = W.copy()
    dent[:, 3] *= 0.6 / np.linalg.norm(W[:, 3])                            # regular angles, one reflex vertex
    lab = label(stack([TMSParams(jnp.asarray(w), p.b) for w in (half_gap, missing, dent)]))
    np.testing.assert_array_equal(lab.code, NONE)
    np.testing.assert_array_equal(lab.k, [6, 5, 6])
    np.testing.assert_array_equal(lab.regular, [False, False, True])
    assert not bool(lab.convex[2])


def test_labels_vmap_over_batch_axes_and_have_names():
    p = make_kgon(6, 5, 1.2, -0.3, n_positive=1)
    batch = jax.tree.map(lambda a: jnp.broadcast_to(a, (3, 4) + a.shape), p)
    lab = label(batch)
    assert lab.code.shape == lab.n_positive.shape == (3, 4)
    names = label_names(lab, num_features=6)
    assert names.shape == (3, 4) and names[0, 0] == "5-gon +"
    assert label_name(6, 0, 6) == "6-gon" and label_name(NONE) == "none" and label_name(4, 1, 6) == "4-gon +-"
    assert jax.jit(lambda q: label(q).code)(p) == 5


def test_label_refuses_bad_arguments():
    with pytest.raises(TypeError, match="^params: expected slt_relu.tms.TMSParams"):
        label((jnp.zeros((2, 3)), jnp.zeros(3)))
    with pytest.raises(ValueError, match="^params: expected W of shape"):
        label(TMSParams(jnp.zeros((3, 3)), jnp.zeros(3)))
    with pytest.raises(ValueError, match="^length_threshold: expected a positive"):
        label(make_kgon(4, 4), length_threshold=0.0)
    with pytest.raises(ValueError, match="^angle_tol: expected a positive"):
        label(make_kgon(4, 4), angle_tol=-1.0)
