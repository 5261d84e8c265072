"""The 8 x 8 digits (slt_relu.datasets), a ReLU classifier trained on them (slt_relu.mlp.train_classifier) and
Sattelberg et al.'s analysis of its local affine maps (slt_relu.local_maps): checked against NumPy by hand."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt_relu.datasets import load_digits, one_hot
from slt_relu.local_maps import cluster_accuracy, map_between
from slt_relu.mlp import activation_patterns, init_mlp, mlp_forward, train_classifier
from slt_relu.regions import distinct_patterns

WIDTHS = (64, 32, 32, 10)


@pytest.fixture(scope="module")
def digits():
    return load_digits(key=0)


@pytest.fixture(scope="module")
def net(digits):
    params, loss = train_classifier(jax.random.PRNGKey(1), WIDTHS, digits.x_train, digits.y_train, steps=600,
                                    learning_rate=3e-3, batch_size=64)
    return params, loss


def numpy_local_maps(params, x):
    """(W (p, o, n), b (p, o)) of f around each point by a NumPy forward pass: W = V D_{L-1} W_{L-1} ... D_1 W_1."""
    layers = [(np.asarray(l.w, np.float64), np.asarray(l.b, np.float64)) for l in params.layers]
    x = np.asarray(x, np.float64)
    W = np.broadcast_to(np.eye(x.shape[1]), (len(x), x.shape[1], x.shape[1]))
    b, h = np.zeros((len(x), x.shape[1])), x
    for w, c in layers[:-1]:
        z = h @ w.T + c
        on = (z > 0).astype(float)
        W, b, h = on[:, :, None] * (w @ W), on * (b @ w.T + c), np.maximum(z, 0)
    w, c = layers[-1]
    return w @ W, b @ w.T + c


def predictions(params, x):
    return np.asarray(jnp.argmax(mlp_forward(params, jnp.asarray(x)), -1))


# ------------------------------------------------------------------ the data


def test_digits_split_shapes_range_and_cover(digits):
    from sklearn.datasets import load_digits as sklearn_digits

    assert digits.x_train.shape == (1347, 64) and digits.x_test.shape == (450, 64)
    assert digits.y_train.shape == (1347,) and digits.y_test.shape == (450,) and digits.y_train.dtype == np.int64
    assert digits.x_train.dtype == np.float64                              # JAX's default float, x64 on
    both = np.concatenate([digits.x_train, digits.x_test])
    assert both.min() == 0.0 and both.max() == 1.0                         # grey levels 0..16, divided by 16
    index = np.concatenate([digits.train_index, digits.test_index])
    np.testing.assert_array_equal(np.sort(index), np.arange(1797))         # disjoint, and all 1797 images
    raw = sklearn_digits()
    np.testing.assert_array_equal(digits.x_test, raw.data[digits.test_index] / 16)
    np.testing.assert_array_equal(digits.y_train, raw.target[digits.train_index])
    per_class = np.bincount(raw.target)                                    # stratified: round(n_c / 4) per class
    np.testing.assert_array_equal(np.bincount(digits.y_test), np.round(per_class / 4).astype(int))
    assert digits.num_classes == 10


def test_digits_split_is_deterministic(digits):
    again = load_digits(key=jax.random.PRNGKey(0))                         # an int seed is PRNGKey(seed)
    for a, b in zip(digits, again):
        np.testing.assert_array_equal(a, b)
    other = load_digits(key=1)
    assert not np.array_equal(other.test_index, digits.test_index)
    plain = load_digits(key=0, stratify=False, test_fraction=0.1, dtype=np.float32)
    assert plain.x_test.shape == (180, 64) and plain.x_train.dtype == np.float32
    assert len(np.intersect1d(plain.train_index, plain.test_index)) == 0


def test_digits_bad_input_and_missing_extra(monkeypatch):
    for bad in (0, 1, 1.5, -0.2, "a"):
        with pytest.raises(ValueError, match="test_fraction"):
            load_digits(test_fraction=bad)
    with pytest.raises(ValueError, match="key"):
        load_digits(key="seed")
    with pytest.raises(ValueError, match="dtype"):
        load_digits(dtype=np.int32)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)             # as if scikit-learn were not installed
    with pytest.raises(ImportError, match=r'pip install "slt_relu\[data\]"'):
        load_digits()


def test_one_hot():
    np.testing.assert_array_equal(one_hot(np.array([2, 0]), 3), [[0, 0, 1], [1, 0, 0]])
    with pytest.raises(ValueError, match="labels"):
        one_hot(np.array([3]), 3)


# ------------------------------------------------------------------ the classifier


def test_classifier_learns_the_digits(digits, net):
    """A small ReLU MLP reaches ~97-98 % on the 450 test digits (measured: 97.6-98.0 % for several seeds, float32
    and float64).  With 450 test images the binomial standard error at 97 % is 0.8 %, so the 90 % bound sits ~9
    standard errors below: it fails for a broken trainer, not for a seed or a platform's rounding."""
    params, loss = net
    assert params.widths == WIDTHS and loss < 0.1
    assert np.mean(predictions(params, digits.x_test) == digits.y_test) > 0.90


def test_classifier_bad_input(digits):
    x, y, key = digits.x_train[:20], digits.y_train[:20], jax.random.PRNGKey(0)
    with pytest.raises(ValueError, match="y"):
        train_classifier(key, WIDTHS, x, y + 10, steps=1, learning_rate=0.1)
    with pytest.raises(ValueError, match="batch_size"):
        train_classifier(key, WIDTHS, x, y, steps=1, learning_rate=0.1, batch_size=21)
    with pytest.raises(ValueError, match="widths"):
        train_classifier(key, (64, 1), x, y, steps=1, learning_rate=0.1)
    with pytest.raises(ValueError, match="x"):
        train_classifier(key, WIDTHS, x[:, :10], y, steps=1, learning_rate=0.1)


# ------------------------------------------------------------------ clustering the local maps (Table 1)


def test_one_centre_per_region_is_the_network(digits, net):
    """k = the number of distinct activation patterns among the points: every point keeps its own affine map, so the
    rebuilt classifier is the network.  Labelled by the network's own predictions, its accuracy is exactly 1."""
    params, _ = net
    x, y = digits.x_test[:120], digits.y_test[:120]
    regions = distinct_patterns(np.asarray(activation_patterns(params, x)))[0]
    own = cluster_accuracy(jax.random.PRNGKey(3), params, x, predictions(params, x), [regions])
    assert own.regions == regions and own.accuracy[0] == 1.0 and own.network_accuracy == 1.0
    true = cluster_accuracy(jax.random.PRNGKey(3), params, x, y, [regions])
    assert true.correct[0] == np.sum(predictions(params, x) == y)
    assert true.accuracy[0] == true.network_accuracy


def test_one_centre_is_the_mean_affine_classifier(digits, net):
    """k = 1 (fit on the training set, measured on the test set): the classifier x -> argmax (W_bar x + b_bar), the
    mean of the local maps over the training points, computed here by a NumPy forward pass."""
    params, _ = net
    W, b = numpy_local_maps(params, digits.x_train)
    W_bar, b_bar = W.mean(0), b.mean(0)
    by_hand = np.argmax(digits.x_test @ W_bar.T + b_bar, 1)
    out = cluster_accuracy(jax.random.PRNGKey(4), params, digits.x_test, digits.y_test, [1, 5],
                           fit_x=digits.x_train, iters=20)
    assert out.correct[0] == np.sum(by_hand == digits.y_test)
    assert out.accuracy[0] == out.correct[0] / 450 and out.ks.tolist() == [1, 5]
    assert out.network_accuracy == np.mean(predictions(params, digits.x_test) == digits.y_test)
    assert 1 <= out.regions <= 1347


def test_cluster_accuracy_bad_input(digits, net):
    params, _ = net
    x, y, key = digits.x_test[:30], digits.y_test[:30], jax.random.PRNGKey(0)
    for ks in ([0], [31], [2, -1], [1.5], []):
        with pytest.raises(ValueError, match="ks"):
            cluster_accuracy(key, params, x, y, ks)
    with pytest.raises(ValueError, match="ks"):
        cluster_accuracy(key, params, x, y, [6], fit_x=x[:5])            # k above the fitted points
    with pytest.raises(ValueError, match="^x"):
        cluster_accuracy(key, params, x[:, :10], y, [1])
    with pytest.raises(ValueError, match="^y"):
        cluster_accuracy(key, params, x, y[:-1], [1])
    with pytest.raises(ValueError, match="^y"):
        cluster_accuracy(key, params, x, y + 10, [1])
    with pytest.raises(ValueError, match="fit_x"):
        cluster_accuracy(key, params, x, y, [1], fit_x=x[:, :3])
    with pytest.raises(ValueError, match="params"):
        cluster_accuracy(key, init_mlp(key, (64, 4, 1)), x, y * 0, [1])  # one output is not a classifier


# ------------------------------------------------------------------ maps between networks (Table 2)


def test_map_from_a_network_to_itself(digits, net):
    """A to A: zero error at every point (float64 rounding: relative 1e-10) and the network's own accuracy.  The first
    hidden layer (32) is narrower than n + 1 = 65, so the dual points span a subspace of dimension r <= 33 and the
    minimum-norm M is the orthogonal projector onto it (M^2 = M, rank r), the identity on every dual point."""
    params, _ = net
    out = map_between(params, params, digits.x_test, digits.y_test, fit_x=digits.x_train[:400])
    assert out.maps.shape == (10, 65, 65)
    assert np.all(out.fit_error < 1e-10) and np.all(out.relative_error < 1e-10)
    np.testing.assert_allclose(out.r2, 1.0, atol=1e-12)
    assert out.accuracy == out.target_accuracy == np.mean(predictions(params, digits.x_test) == digits.y_test)
    M = out.maps[0]
    np.testing.assert_allclose(M @ M, M, atol=1e-9)
    assert np.linalg.matrix_rank(M, tol=1e-6) <= 33


def test_map_from_a_wide_network_to_itself_is_the_identity(digits):
    """With a first hidden layer of 96 >= 65 the dual points at 400 training digits span R^65: M = I (float64; the
    tolerance allows C's condition number, ~1e3 here, times eps)."""
    params = init_mlp(jax.random.PRNGKey(5), (64, 96, 10), bias_std=0.1)
    out = map_between(params, params, digits.x_train[:400])
    np.testing.assert_allclose(out.maps, np.broadcast_to(np.eye(65), (10, 65, 65)), atol=1e-9)
    assert np.all(out.relative_error < 1e-12) and np.isnan(out.accuracy) and np.isnan(out.target_accuracy)


def test_map_rank_cut_off_in_float32(digits):
    """A float32 network A fitted at points where one first-layer neuron is off: its dual points there span no
    direction of that neuron's row (exactly; float32 rounding, ~1e-8 s_max, fills it in), and the test digits where
    the neuron is on have a component along it.  Without a cut-off (rtol=0) lstsq inverts the rounding and the map
    blows up at those digits; the default rtol (max(p, n+1) eps32) gives that direction no weight and keeps the
    error at the test digits near the fit's."""
    x_fit, x_test = digits.x_train.astype(np.float32), digits.x_test.astype(np.float32)
    a = init_mlp(jax.random.PRNGKey(6), (64, 32, 32, 10), bias_std=0.1, dtype=jnp.float32)
    b = init_mlp(jax.random.PRNGKey(7), (64, 32, 10), bias_std=0.1, dtype=jnp.float32)
    on = np.asarray(activation_patterns(a, x_fit))[:, :32]
    j = np.argmin(np.abs(on.mean(0) - 0.5))               # a first-layer neuron on at about half the digits
    fit = x_fit[~on[:, j]][:300]
    assert len(fit) >= 100 and np.asarray(activation_patterns(a, x_test))[:, j].any()
    good = map_between(a, b, x_test, fit_x=fit)
    bad = map_between(a, b, x_test, fit_x=fit, rtol=0.0)
    assert np.all(good.relative_error < 2 * good.fit_error + 0.1)
    assert np.max(bad.relative_error) > 100 * np.max(good.relative_error)


def test_map_between_bad_input(digits, net):
    params, _ = net
    x, y = digits.x_test[:30], digits.y_test[:30]
    other = init_mlp(jax.random.PRNGKey(0), (64, 8, 9))
    with pytest.raises(ValueError, match="params_b"):
        map_between(params, other, x)
    with pytest.raises(ValueError, match="^x"):
        map_between(params, params, x[:, :5])
    with pytest.raises(ValueError, match="^y"):
        map_between(params, params, x, y[:3])
    with pytest.raises(ValueError, match="fit_x"):
        map_between(params, params, x, fit_x=np.full((4, 64), np.nan))
    with pytest.raises(ValueError, match="rtol"):
        map_between(params, params, x, rtol=-1.0)
