"""The model families the toolkit ships, as :class:`~slt_relu.models.Model` objects: the two-layer ReLU
network (DSLT3), the deep ReLU MLP (Sattelberg et al. 2020; Grigsby et al. 2023) and the toy model of
superposition (Chen et al. 2023).  Each is the generic protocol plus what its family knows: its parameter
type, its scaling symmetries, and (through its own modules) the structure that generic code cannot see.

    two_layer(d, n_in):  f(x) = c + sum_i q_i relu(<w_i, x> + b_i),        TwoLayer(w, b, q, c)
    mlp(widths):         f(x) = W_L relu(... relu(W_1 x + b_1) ...) + b_L,  MLP(layers)
    tms(c, r=2):         f(x) = ReLU(W^T W x + b),                          TMSParams(W, b)
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .._validate import check_count
from ..mlp import MLP, Dense, check_widths, mlp_forward
from ..network import TwoLayer, forward, scaling_generators
from ..pytree import unravel_fn
from .base import Model
from .tms import R_HIDDEN, TMSParams
from .tms import forward as tms_forward

__all__ = ["MLPModel", "TMSModel", "TwoLayerModel", "mlp", "tms", "two_layer"]


def _structure(params):
    return unravel_fn(params)[1]


@dataclasses.dataclass(frozen=True)
class TwoLayerModel(Model):
    """The two-layer ReLU network of width d on n_in inputs (DSLT3): parameters ``TwoLayer(w (d, n_in),
    b (d,), q (d,), c ())``, flat order w row-major, b, q, c (D = d (n_in + 2) + 1)."""

    @property
    def width(self) -> int:
        return self.structure.shapes[0][0]

    @property
    def n_in(self) -> int:
        return self.structure.shapes[0][1]

    def scaling_generators(self, params) -> jax.Array:
        """(d, D): node i's generator (w_i, b_i, -q_i) in its slots (DSLT3 Appendix 1)."""
        return scaling_generators(params)


def two_layer(width: int, n_in: int, dtype=None) -> TwoLayerModel:
    """The two-layer ReLU network f(x) = c + sum_i q_i relu(<w_i, x> + b_i) as a model.

    Args:
        width: d >= 1 hidden nodes.
        n_in: the input dimension, >= 1.
        dtype: the parameters' dtype (default: JAX's default float).

    Returns:
        TwoLayerModel, outputs (n,).
    """
    d, n_in = check_count(width, "width"), check_count(n_in, "n_in")
    dtype = dtype or jnp.zeros(()).dtype
    z = lambda *shape: jnp.zeros(shape, dtype)
    return TwoLayerModel(forward, _structure(TwoLayer(z(d, n_in), z(d), z(d), z())), f"two_layer({d}, {n_in})")


@dataclasses.dataclass(frozen=True)
class MLPModel(Model):
    """A deep ReLU network ``MLP(layers)`` of widths (n_0, ..., n_L): layer l's ``Dense(w (n_l, n_(l-1)),
    b (n_l,))``, flat order layer by layer, w row-major then b."""

    @property
    def widths(self) -> tuple[int, ...]:
        shapes = self.structure.shapes
        return (shapes[0][1],) + tuple(shapes[2 * l][0] for l in range(len(shapes) // 2))

    def scaling_generators(self, params) -> jax.Array:
        """(H, D), H the hidden nodes: node j of hidden layer l scales its incoming (w_l[j], b_l[j]) up and its
        outgoing column w_(l+1)[:, j] down, f unchanged (relu(s a) = s relu(a), s > 0)."""
        flat, _ = unravel_fn(params)
        rows, offsets, start = [], [], 0
        for layer in params.layers:
            offsets.append(start)
            start += layer.w.size + layer.b.size
        for l, (layer, nxt) in enumerate(zip(params.layers[:-1], params.layers[1:])):
            n_out, n_in = layer.w.shape
            w0, b0, w1 = offsets[l], offsets[l] + layer.w.size, offsets[l + 1]
            for j in range(n_out):
                v = jnp.zeros_like(flat)
                v = v.at[w0 + j * n_in: w0 + (j + 1) * n_in].set(layer.w[j])
                v = v.at[b0 + j].set(layer.b[j])
                v = v.at[w1 + j + np.arange(nxt.w.shape[0]) * n_out].set(-nxt.w[:, j])
                rows.append(v)
        return jnp.stack(rows) if rows else jnp.zeros((0, flat.size), flat.dtype)


def mlp(widths, dtype=None) -> MLPModel:
    """The deep ReLU network of widths (n_0, ..., n_L) as a model: ReLU after every layer but the last.

    Args:
        widths: n_0 inputs, the hidden widths, n_L outputs (at least two entries, each >= 1).
        dtype: the parameters' dtype (default: JAX's default float).

    Returns:
        MLPModel, outputs (n, n_L).
    """
    widths = check_widths(widths)
    dtype = dtype or jnp.zeros(()).dtype
    layers = tuple(Dense(jnp.zeros((b, a), dtype), jnp.zeros((b,), dtype)) for a, b in zip(widths[:-1], widths[1:]))
    return MLPModel(mlp_forward, _structure(MLP(layers)), f"mlp({', '.join(map(str, widths))})")


@dataclasses.dataclass(frozen=True)
class TMSModel(Model):
    """The toy model of superposition with c features and r hidden dimensions: ``TMSParams(W (r, c),
    b (c,))``, flat order W row-major, then b; an autoencoder, outputs (n, c)."""

    @property
    def num_features(self) -> int:
        return self.structure.shapes[0][1]


def tms(num_features: int, hidden: int = R_HIDDEN, dtype=None) -> TMSModel:
    """The toy model of superposition f(x) = ReLU(W^T W x + b) as a model (Chen et al. 2023).

    Args:
        num_features: c >= 1.
        hidden: r >= 1 (default 2).
        dtype: the parameters' dtype (default: JAX's default float).

    Returns:
        TMSModel, outputs (n, c).
    """
    c, r = check_count(num_features, "num_features"), check_count(hidden, "hidden")
    dtype = dtype or jnp.zeros(()).dtype
    return TMSModel(tms_forward, _structure(TMSParams(jnp.zeros((r, c), dtype), jnp.zeros((c,), dtype))),
                    f"tms({c}, {r})")
