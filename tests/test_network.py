import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu as S
from slt_relu.network import coordinate_names


def manual_forward(p, x):
    w, b, q, c = (np.asarray(a) for a in p)
    return c + np.maximum(x @ w.T + b, 0) @ q


def test_forward_matches_formula_any_shape(key):
    p = S.init_params(key, 5, 3)
    x = np.random.default_rng(0).normal(size=(4, 7, 3))
    np.testing.assert_allclose(S.forward(p, x), manual_forward(p, x), rtol=1e-12)
    assert S.forward(p, x[0, 0]).shape == ()


def test_flat_roundtrip_and_order():
    p = S.make_params([[1, 2], [3, 4]], [5, 6], [7, 8], 9)
    flat = S.to_flat(p)
    np.testing.assert_array_equal(flat, np.arange(1, 10))
    assert S.num_params(2, 2) == 9
    assert coordinate_names(2, 2) == ["w[0,0]", "w[0,1]", "w[1,0]", "w[1,1]", "b[0]", "b[1]", "q[0]", "q[1]", "c"]
    back = S.from_flat(flat, 2, 2)
    for a, b in zip(back, p):
        np.testing.assert_array_equal(a, b)


def test_restriction_embed_project():
    base = S.make_params([[1.0], [0.0]], [0.0, 0.0], [1.0, 1.0], 0.0)
    r = S.Restriction.from_names(base, ["w[0,0]", "w[1,0]"])
    assert r.num_free == 2 and r.free_names == ["w[0,0]", "w[1,0]"]
    p = r.embed(jnp.array([0.3, 0.7]))
    np.testing.assert_allclose(p.w[:, 0], [0.3, 0.7])
    np.testing.assert_allclose(p.q, [1.0, 1.0])
    np.testing.assert_allclose(r.project(p), [0.3, 0.7])
    batch = jax.vmap(r.embed)(jnp.ones((4, 2)))
    assert batch.w.shape == (4, 2, 1)
    flat = r.embed_flat(jnp.array([0.3, 0.7], jnp.float32))          # flat order w, b, q, c; theta's dtype
    assert flat.dtype == jnp.float32
    np.testing.assert_array_equal(flat, np.array([0.3, 0.7, 0.0, 0.0, 1.0, 1.0, 0.0], np.float32))


def test_bad_shapes_raise_clear_errors():
    with pytest.raises(ValueError, match="b: expected shape"):
        S.make_params([[1.0, 2.0]], [1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="x: expected a last axis of n_in = 2"):
        S.forward(S.make_params([[1.0, 2.0]], 0.0, 1.0), np.zeros((3, 5)))
    with pytest.raises(ValueError, match="coordinate 'z\\[0\\]'"):
        S.Restriction.from_names(S.make_params([[1.0]], 0.0, 1.0), ["z[0]"])
    with pytest.raises(ValueError, match="flat: expected shape"):
        S.from_flat(np.zeros(5), 2, 2)


def test_forward_columns_is_forward():
    import jax

    import slt_relu as S
    from slt_relu.network import forward_columns

    p = S.init_params(jax.random.PRNGKey(0), 5, 3)
    x = jax.random.normal(jax.random.PRNGKey(1), (50, 3))
    np.testing.assert_allclose(forward_columns(p, x.T), S.forward(p, x), rtol=1e-12)
    with pytest.raises(ValueError, match="x_cols: expected a first axis of n_in = 3"):
        forward_columns(p, x)


def test_pad_nodes_appends_zero_nodes_that_leave_the_function_unchanged():
    """Zero nodes (w = b = q = 0) computed relu(0) * 0 = 0: f is the same at every x; shapes (width, n_in); a width
    below the nodes is refused."""
    from slt_relu.network import forward, make_params, pad_nodes

    p = make_params([[1.0, -0.5], [0.3, 0.8]], [0.1, -0.2], [1.5, -0.7], 0.4)
    wide = pad_nodes(p, 5)
    assert wide.w.shape == (5, 2) and wide.b.shape == wide.q.shape == (5,) and wide.w.dtype == p.w.dtype
    assert not np.any(np.asarray(wide.w[2:])) and not np.any(np.asarray(wide.q[2:]))
    x = np.random.default_rng(0).uniform(-2, 2, (50, 2))
    # the same sum with exact zeros added; a different summation order rounds differently (float64: 1e-14)
    np.testing.assert_allclose(np.asarray(forward(wide, x)), np.asarray(forward(p, x)), rtol=1e-14, atol=1e-15)
    assert pad_nodes(p, 2).w.shape == (2, 2)
    with pytest.raises(ValueError, match="width: expected at least the 2 nodes"):
        pad_nodes(p, 1)
