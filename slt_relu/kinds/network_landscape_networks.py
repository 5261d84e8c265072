"""The network_landscape kind's networks (``slt_relu.kinds.network_landscape``): each source's model, point, loss,
data and, where the network is an MLP of its input, the 2-D slice of input space its regions are counted on.

- ``truth``: ``slt_relu.models.two_layer(d, n_in)`` at the truth's parameters (its model's base, padded with zero
  nodes to d), data x ~ q(x), y = f0(x) + sigma eps, the loss L_n(w) = (1/n) sum_k (y_k - f(x_k))^2 / (2 sigma^2) +
  log(sigma sqrt(2 pi)) (:func:`slt_relu.models.gaussian_loss`); the slice: the input square [-a, a]^2 of q(x)
  (a: the box's half-width, or 3 std of Gaussian inputs);
- ``digits``: an MLP trained by :func:`slt_relu.mlp.train_classifier` (Adam, as
  benchmarks/bench_digits_sattelberg.py) on ``load_digits()``'s 1,347 training images, the loss its mean softmax
  cross-entropy on them (:func:`cross_entropy`); the slice: the plane through three training images x_a, x_b, x_c,
  centred at their mean m, x(s, t) = m + s (x_b - x_a) + t (x_c - x_a), |s|, |t| <= 1 (the images at (-1/3, -1/3),
  (2/3, -1/3), (-1/3, 2/3));
- ``tms``: the toy model of superposition at its refined k-gon (:func:`slt_relu.tms.refined_kgon`), the exact
  population loss (:func:`tms_population_loss`) or L_n on n inputs x = mu e_i (:func:`slt_relu.tms.sample_inputs`,
  as the tms kinds draw them); no regions: f(x) = ReLU(W^T W x + b) is one ReLU layer of the linear map W^T W, whose
  regions are those of the c hyperplanes (W^T W x + b)_j = 0, not an MLP of free weights the slice would probe.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = []   # nothing to import: a part of the kinds that import it, not an API

DIGITS_SPLIT = 0              # load_digits' split: its seed (as benchmarks/bench_digits_sattelberg.py)


class Network(NamedTuple):
    """A point of a network: model (``slt_relu.models.Model``), params, loss_fn(params, data), data, description
    (one line), loss_name (the loss's name on axes), attrs (the source's numbers: n, sigma, training accuracy, ...),
    mlp (the network as an ``slt_relu.mlp.MLP`` where its regions are counted, else None), plane (origin, u, v,
    half_width, anchors (A, 2) in (s, t), anchor labels, axis names) or None."""

    model: object
    params: object
    loss_fn: object
    data: object
    description: str
    loss_name: str
    attrs: dict
    mlp: object = None
    plane: tuple | None = None


def cross_entropy(params, data) -> jax.Array:
    """The mean softmax cross-entropy of an MLP's logits: -(1/n) sum_k log softmax(f(x_k))_{y_k}, data = (x, y)."""
    from ..mlp import mlp_forward

    x, y = data
    logp = jax.nn.log_softmax(mlp_forward(params, x), axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def tms_population_loss(params, data=None) -> jax.Array:
    """The toy model's exact population loss L(w) (:func:`slt_relu.tms.population_loss`); data ignored (None)."""
    from ..tms import population_loss

    return population_loss(params)


def build(r, key) -> Network:
    """The Network of a resolved config (``network_landscape_settings.Resolved``); key: its data's and training's."""
    source = r.settings.network.source
    return {"truth": _truth, "digits": _digits, "tms": _tms}[source](r, key)


def _truth(r, key) -> Network:
    from .. import models
    from ..loss import sample_dataset
    from ..mlp import from_two_layer
    from ..network import pad_nodes

    net, ex = r.settings.network, r.example
    base = ex.model.base
    d, n_in = net.width or base.width, base.n_in
    dtype = jnp.zeros(()).dtype
    params = pad_nodes(base, d, dtype)
    truth = jax.tree.map(lambda a: jnp.asarray(a, dtype), ex.truth)
    data = sample_dataset(key, truth, r.inputs, net.n, r.sigma)
    model = models.two_layer(d, n_in, dtype)
    plane = None
    if r.regions:
        a = float(getattr(r.inputs, "half_width", None) or 3.0 * r.inputs.std)
        plane = (np.zeros(n_in), np.eye(n_in)[0], np.eye(n_in)[1], a, np.zeros((0, 2)), [], ("x1", "x2"))
    desc = f"{ex.name} truth's network, width {d} ({model.num_params} parameters), n = {net.n}"
    return Network(model, params, models.gaussian_loss(model, r.sigma), data, desc, f"L_n(w), n = {net.n}",
                   {"n": net.n, "sigma": float(r.sigma), "width": d, "truth": ex.name}, from_two_layer(params), plane)


def _digits(r, key) -> Network:
    from .. import models
    from ..datasets import load_digits
    from ..mlp import mlp_forward, train_classifier

    net, t = r.settings.network, r.settings.landscape
    digits = load_digits(key=DIGITS_SPLIT)
    params, _ = train_classifier(key, net.widths, digits.x_train, digits.y_train, steps=net.steps,
                                 learning_rate=net.learning_rate, batch_size=net.batch_size or None)
    data = (jnp.asarray(digits.x_train), jnp.asarray(digits.y_train))
    accuracy = lambda x, y: float(np.mean(np.argmax(np.asarray(mlp_forward(params, jnp.asarray(x))), 1) == y))
    model = models.mlp(net.widths)
    attrs = {"train_loss": float(cross_entropy(params, data)), "steps": net.steps,
             "train_accuracy": accuracy(digits.x_train, digits.y_train),
             "test_accuracy": accuracy(digits.x_test, digits.y_test)}
    plane = None
    if r.regions:
        chosen = t.region_digits or (0, 1, 2)
        idx = [int(np.flatnonzero(digits.y_train == c)[0]) for c in chosen]
        xa, xb, xc = (np.asarray(digits.x_train[i], np.float64) for i in idx)
        anchors = np.array([[-1.0, -1.0], [2.0, -1.0], [-1.0, 2.0]]) / 3.0
        labels = [f"training image {i} (digit {c})" for i, c in zip(idx, chosen)]
        plane = ((xa + xb + xc) / 3.0, xb - xa, xc - xa, 1.0, anchors, labels,
                 (f"s (along image {idx[1]} - image {idx[0]})", f"t (along image {idx[2]} - image {idx[0]})"))
    widths = "-".join(map(str, net.widths))
    desc = f"digits MLP {widths} ({model.num_params} parameters), {net.steps} Adam steps"
    return Network(model, params, cross_entropy, data, desc, "cross-entropy on the training digits", attrs, params,
                   plane)


def _tms(r, key) -> Network:
    from .. import models
    from ..tms import empirical_loss, kgon_loss_formula, refined_kgon, sample_inputs

    net = r.settings.network
    c, k, npos = net.features, net.k, net.n_positive
    params = refined_kgon(c, k, npos)
    model = models.tms(c)
    variant = "+" * npos + "-" * (c - k - npos)
    name = f"{k}-gon{(' ' + variant) if variant else ''}"
    attrs = {"features": c, "k": k, "n_positive": npos, "kgon_loss": kgon_loss_formula(c, k, npos)}
    if net.loss == "population":
        loss_fn, data, loss_name = tms_population_loss, None, "L(w), exact"
    else:
        loss_fn, data, loss_name = empirical_loss, sample_inputs(key, net.n, c), f"L_n(w), n = {net.n}"
        attrs["n"] = net.n
    desc = f"toy model of superposition, c = {c}, at its {name} ({model.num_params} parameters)"
    return Network(model, params, loss_fn, data, desc, loss_name, attrs)
