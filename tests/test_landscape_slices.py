"""Directions and slices of any loss (slt_relu.landscape): filter normalisation (Li et al. 2018) by hand, slices
against a Python loop over the grid, a quadratic's slice along a Hessian eigenvector against 0.5 lambda t^2, the
scaling symmetry's orbit (exactly flat) against its tangent line (flat to first order only), and a Bezier curve
(Garipov et al. 2018) around a ring-shaped valley.  float64 throughout (tests/conftest.py)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu as S
from slt_relu.landscape import (bezier_curve, bezier_points, curve_losses, hessian_directions, path_losses,
                                random_direction, scaling_direction, scaling_orbit, segment, slice_1d, slice_2d)
from slt_relu.loss import TwoLayerLoss


def relative(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300))


def dict_mlp(key):
    """A ReLU MLP (3, 5, 4, 1) written as a nested dict, rows of each "w" its output units."""
    k = jax.random.split(key, 6)
    shapes = {"hidden": ((5, 3), (5,)), "middle": ((4, 5), (4,)), "out": ((1, 4), (1,))}
    return {name: {"w": jax.random.normal(k[2 * i], ws), "b": 0.1 * jax.random.normal(k[2 * i + 1], bs)}
            for i, (name, (ws, bs)) in enumerate(shapes.items())}


def mlp_loss(params, data):
    """Mean squared error of the dict MLP (module level: hashable, one compiled program per shape)."""
    x, y = data
    h = jax.nn.relu(x @ params["hidden"]["w"].T + params["hidden"]["b"])
    h = jax.nn.relu(h @ params["middle"]["w"].T + params["middle"]["b"])
    return jnp.mean((h @ params["out"]["w"].T + params["out"]["b"] - y[:, None]) ** 2)


def quadratic(params, A):
    """0.5 w^T A w of the flat w = (a, b row-major): its Hessian is A everywhere."""
    w = jnp.concatenate([params["a"], params["b"].reshape(-1)])
    return 0.5 * w @ (A @ w)


def ring(params, data):
    """(|w|^2 - 1)^2 in the plane: minima on the unit circle, a peak of 1 at the origin."""
    return (jnp.sum(params["w"] ** 2) - 1.0) ** 2


@pytest.fixture(scope="module")
def mlp_problem():
    params = dict_mlp(jax.random.PRNGKey(0))
    x = jax.random.normal(jax.random.PRNGKey(1), (30, 3))
    return params, (x, jnp.sin(x[:, 0]) + 0.5 * x[:, 1])


def test_filter_normalised_rows_have_the_norms_of_params_rows_and_biases_are_zero(mlp_problem):
    params, _ = mlp_problem
    params = {**params, "conv": jax.random.normal(jax.random.PRNGKey(3), (3, 2, 4))}     # 3 filters of (2, 4)
    d = random_direction(jax.random.PRNGKey(4), params)
    # float64: a row of d is d_r * (|w_r| / |d_r|), so its norm is |w_r| to a few rounding errors (~1e-16)
    for name in ("hidden", "middle", "out"):
        w, dw = np.asarray(params[name]["w"]), np.asarray(d[name]["w"])
        assert dw.shape == w.shape and relative(np.linalg.norm(dw, axis=1), np.linalg.norm(w, axis=1)) < 1e-12
        assert not np.allclose(dw / np.linalg.norm(dw, axis=1, keepdims=True),
                               w / np.linalg.norm(w, axis=1, keepdims=True))                # a new direction
        assert np.all(np.asarray(d[name]["b"]) == 0)
    conv = np.asarray(params["conv"]).reshape(3, -1)
    assert relative(np.linalg.norm(np.asarray(d["conv"]).reshape(3, -1), axis=1), np.linalg.norm(conv, axis=1)) < 1e-12
    # per-leaf ("layer") normalisation; biases kept (as one filter) when not ignored; columns with filter_axis=-1
    d = random_direction(jax.random.PRNGKey(4), params, normalize="layer", ignore_bias=False)
    for leaf_d, leaf_p in zip(jax.tree.leaves(d), jax.tree.leaves(params)):
        assert relative(np.linalg.norm(leaf_d), np.linalg.norm(leaf_p)) < 1e-12
    d = random_direction(jax.random.PRNGKey(4), params, filter_axis=-1)
    w = np.asarray(params["hidden"]["w"])
    assert relative(np.linalg.norm(np.asarray(d["hidden"]["w"]), axis=0), np.linalg.norm(w, axis=0)) < 1e-12
    raw = random_direction(jax.random.PRNGKey(4), params, normalize=None)
    assert all(np.all(leaf != 0) for leaf in jax.tree.leaves(raw))


def test_a_two_layer_networks_q_is_its_output_layers_one_filter():
    params = S.init_params(jax.random.PRNGKey(5), 4, 2)
    d = random_direction(jax.random.PRNGKey(6), params)
    assert isinstance(d, S.TwoLayer)
    assert relative(np.linalg.norm(d.w, axis=1), np.linalg.norm(params.w, axis=1)) < 1e-12       # rel: rounding
    assert relative(np.linalg.norm(d.q), np.linalg.norm(params.q)) < 1e-12
    assert np.all(np.asarray(d.b) == 0) and float(d.c) == 0.0


def test_slice_2d_is_the_loss_at_each_grid_point_whatever_the_chunk(mlp_problem, compiles):
    params, data = mlp_problem
    u = random_direction(jax.random.PRNGKey(7), params)
    v = random_direction(jax.random.PRNGKey(8), params)
    s, t = np.linspace(-1.0, 1.0, 4), np.array([-0.5, 0.0, 0.75])
    Z = np.asarray(slice_2d(mlp_loss, params, data, u, v, s, t))
    assert Z.shape == (4, 3)
    loop = np.array([[float(mlp_loss(jax.tree.map(lambda p, a, b: p + si * a + tj * b, params, u, v), data))
                      for tj in t] for si in s])
    # float64: the same sums in another order (params + s u + t v as one dot product, vmapped); losses O(1)
    assert relative(Z, loop) < 1e-12
    assert relative(slice_2d(mlp_loss, params, data, u, v, s, t, chunk=1), Z) < 1e-12         # chunks: same numbers
    assert relative(slice_2d(mlp_loss, params, data, u, v, s, t, chunk=5), Z) < 1e-12         # with a remainder
    assert relative(slice_1d(mlp_loss, params, data, u, s), Z[:, 1]) < 1e-12                  # t = 0: the line
    compiles()
    slice_2d(mlp_loss, params, data, v, u, s + 0.1, t)                   # a new plane, grids of the same shapes
    assert compiles() == 0                                                # reuses the compiled program


def test_slice_2d_of_a_models_gaussian_loss_matches_the_loop():
    model = S.models.mlp((2, 6, 1))
    params = model.init(jax.random.PRNGKey(9))
    x = jax.random.normal(jax.random.PRNGKey(10), (25, 2))
    data, loss = (x, jnp.tanh(x[:, 0])), S.GaussianLoss(model, 0.5)
    u, v = (random_direction(jax.random.PRNGKey(k), params) for k in (11, 12))
    s, t = np.array([-0.3, 0.2]), np.array([0.1, 0.4, 0.9])
    Z = np.asarray(slice_2d(loss, params, data, u, v, s, t, chunk=4))
    loop = [[float(loss(jax.tree.map(lambda p, a, b: p + si * a + tj * b, params, u, v), data)) for tj in t]
            for si in s]
    assert relative(Z, loop) < 1e-12                      # float64 rounding only (as above)


def test_a_quadratics_slice_along_a_hessian_eigenvector_is_half_lambda_t_squared():
    lams = np.array([5.0, 2.0, 1.0, 0.5, 0.1, 0.0])
    Q = np.linalg.qr(np.random.default_rng(0).standard_normal((6, 6)))[0]
    A = jnp.asarray((Q * lams) @ Q.T)
    params = {"a": jnp.zeros(2), "b": jnp.zeros((2, 2))}
    values, (v1, v2) = hessian_directions(quadratic, params, A, 2, jax.random.PRNGKey(13))
    # Lanczos runs m = D = 6 steps here, so its eigenpairs are exact up to float64 rounding of A's entries
    np.testing.assert_allclose(values, lams[:2], rtol=1e-12)
    assert jax.tree.structure(v1) == jax.tree.structure(params)
    ts = np.linspace(-2.0, 2.0, 9)
    for lam, v in zip(values, (v1, v2)):
        # v^T A v = lambda to rounding (v a unit eigenvector): 0.5 lambda t^2, relative 1e-12
        np.testing.assert_allclose(slice_1d(quadratic, params, A, v, ts), 0.5 * lam * ts ** 2, rtol=1e-12, atol=0)


@pytest.fixture(scope="module")
def two_layer_problem():
    """A generic width-3 network on data from another network plus noise: nonzero residuals."""
    params = S.init_params(jax.random.PRNGKey(14), 3, 2)
    truth = S.init_params(jax.random.PRNGKey(15), 2, 2)
    x, y = S.sample_dataset(jax.random.PRNGKey(16), truth, S.UniformBox(1.0, 2), 50, sigma=0.3)
    return params, (x, y), TwoLayerLoss(1.0)


def test_the_scaling_orbit_is_exactly_flat_and_its_tangent_line_only_to_first_order(two_layer_problem):
    params, data, loss = two_layer_problem
    L0 = float(loss(params, data))
    orbit = scaling_orbit(params, 1, [0.25, 0.5, 1.0, 2.0, 4.0])
    assert orbit.w.shape == (5, 3, 2)
    # relu(alpha z) / alpha = relu(z): the same outputs up to float64 rounding, so L to rel 1e-12
    assert relative(path_losses(loss, orbit, data), np.full(5, L0)) < 1e-12
    v = scaling_direction(params, 1)
    np.testing.assert_array_equal(S.to_flat(v), S.scaling_generators(params)[1])        # the generator, reused
    h = 1e-4                                # the orbit's tangent at alpha = 1 (central difference: error O(h^2))
    ends = scaling_orbit(params, 1, [1 - h, 1 + h])
    tangent = (S.to_flat(jax.tree.map(lambda a: a[1], ends)) - S.to_flat(jax.tree.map(lambda a: a[0], ends))) / (2 * h)
    np.testing.assert_allclose(tangent, S.to_flat(v), rtol=0, atol=1e-7)
    # along the line node 1's output is (1 + t)(1 - t) q_1 relu(.): L there is L at q_1 -> (1 - t^2) q_1
    ts = np.array([-0.5, 0.0, 0.5])
    line = np.asarray(slice_1d(loss, params, data, v, ts))
    shrunk = float(loss(params._replace(q=params.q.at[1].multiply(0.75)), data))
    assert relative(line, [shrunk, L0, shrunk]) < 1e-12                  # float64 rounding (the same function)
    assert abs(line[2] - L0) > 1e-6                                      # second order: not flat
    slope = jax.jvp(lambda t: loss(jax.tree.map(lambda p, d: p + t * d, params, v), data), (0.0,), (1.0,))[1]
    assert abs(float(slope)) < 1e-12 * max(L0, 1.0)                       # first order: flat (grad f . v = 0)


def test_an_mlp_models_scaling_direction_is_flat_to_first_order():
    model = S.models.mlp((2, 4, 3, 1))
    params = model.init(jax.random.PRNGKey(17))
    x = jax.random.normal(jax.random.PRNGKey(18), (20, 2))
    data, loss = (x, x[:, 0] ** 2), S.GaussianLoss(model, 1.0)
    v = scaling_direction(params, 5, model=model)                # node 1 of the second hidden layer
    assert jax.tree.structure(v) == jax.tree.structure(params)
    slope = jax.jvp(lambda t: loss(jax.tree.map(lambda p, d: p + t * d, params, v), data), (0.0,), (1.0,))[1]
    assert abs(float(slope)) < 1e-12 * float(loss(params, data))


def test_a_bezier_curve_goes_around_the_peak_the_segment_crosses():
    a, b = {"w": jnp.array([1.0, 0.0])}, {"w": jnp.array([-1.0, 0.0])}
    ts = np.linspace(0.0, 1.0, 101)
    straight = np.asarray(slice_1d(ring, a, None, segment(a, b), ts))
    assert straight.max() == 1.0 and straight[50] == 1.0          # through the origin at t = 0.5, exactly
    theta = bezier_curve(ring, a, b, None, jax.random.PRNGKey(19), num_steps=400, learning_rate=0.05)
    along = np.asarray(curve_losses(ring, a, theta, b, None, ts))
    assert along.max() < 0.3 and along[0] == 0.0 and along[-1] == 0.0
    ends = bezier_points(a, theta, b, [0.0, 1.0])
    np.testing.assert_array_equal(ends["w"], np.stack([a["w"], b["w"]]))          # phi(0) = a, phi(1) = b exactly
    # the same curve through path_losses: rounding only
    assert relative(path_losses(ring, bezier_points(a, theta, b, ts), None), along) < 1e-12


@pytest.mark.parametrize("call, name", [
    (lambda p, d: slice_1d(mlp_loss, p, d, {"hidden": p["hidden"]}, [0.0]), "direction"),          # structure
    (lambda p, d: slice_1d(mlp_loss, p, d, jax.tree.map(lambda a: a[..., :1], p), [0.0]), "direction"),  # shapes
    (lambda p, d: slice_1d(mlp_loss, p, d, jax.tree.map(lambda a: a * np.nan, p), [0.0]), "direction"),
    (lambda p, d: slice_1d(mlp_loss, p, d, p, [[0.0, 1.0]]), "ts"),
    (lambda p, d: slice_1d(mlp_loss, p, d, p, []), "ts"),
    (lambda p, d: slice_1d(mlp_loss, p, d, p, [0.0], chunk=0), "chunk"),
    (lambda p, d: slice_2d(mlp_loss, p, d, p, p, [0.0, np.inf], [0.0]), "s"),
    (lambda p, d: slice_2d(mlp_loss, p, d, p, p, [0.0], np.zeros((2, 2))), "t"),
    (lambda p, d: slice_2d(mlp_loss, p, d, p, {"x": 1.0}, [0.0], [0.0]), "v"),
    (lambda p, d: slice_1d(lambda q, e: jnp.zeros(2), p, d, p, [0.0]), "loss_fn"),
    (lambda p, d: random_direction(jax.random.PRNGKey(0), p, normalize="unit"), "normalize"),
    (lambda p, d: random_direction(jax.random.PRNGKey(0), p, filter_axis=2), "filter_axis"),
    (lambda p, d: segment(p, p["hidden"]), "params_b"),
    (lambda p, d: bezier_curve(mlp_loss, p, p, d, jax.random.PRNGKey(0), num_steps=0), "num_steps"),
    (lambda p, d: path_losses(mlp_loss, p, d), "path"),                   # leaves of different leading sizes
])
def test_bad_input_is_a_one_line_error_naming_the_argument(mlp_problem, call, name):
    params, data = mlp_problem
    with pytest.raises(ValueError, match=rf"^{name}\S*: expected") as info:           # a leaf's path may follow
        call(params, data)
    assert "\n" not in str(info.value)


def test_two_layer_helpers_name_their_bad_arguments(two_layer_problem):
    params, _, _ = two_layer_problem
    for call, name in [(lambda: scaling_orbit(params, 0, [1.0, -2.0]), "alphas"),
                       (lambda: scaling_orbit(params, 3, [1.0]), "node"),
                       (lambda: scaling_direction(params, -1), "node")]:
        with pytest.raises(ValueError, match=rf"^{name}: expected"):
            call()
