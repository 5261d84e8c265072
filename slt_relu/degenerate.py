"""Degenerate two-layer networks and the Fisher null directions they add beyond the scaling generators, counted
by hand (DSLT3).

A generic two-layer network f(x) = c + sum_i q_i relu(<w_i, x> + b_i) of width d has Fisher rank D - d
(``slt_relu.fisher``: the d scaling generators v_i = (w_i, b_i, -q_i) span its null space).  A node made
degenerate adds null directions beyond them, its *excess*; so does, on a bounded input box, a node whose
boundary misses the box.  This module builds such networks (:func:`make_degenerate`,
:func:`generic_crossing_params`) and counts their excess by hand (:func:`excess_counts`,
:func:`box_excess_count`); ``slt_relu.fisher.null_accounting`` measures it (tests/test_fisher.py, the
``fisher`` kind's source = "degenerate" points).

References:
    Carroll 2021, "Phase transitions in neural networks" (DSLT3: degenerate nodes and the Fisher count).
"""
from __future__ import annotations

import numpy as np

from .inputs import UniformBox
from .network import TwoLayer, check_count, check_number, check_params, make_params

__all__ = ["box_excess_count", "excess_counts", "generic_crossing_params", "make_degenerate"]


def excess_counts(n_in: int) -> dict:
    """Hand counts of the excess null directions (node 0 degenerate, all other nodes generic), by case.

    q_zero: grad_{w_0, b_0} f = q_0 (x, 1) 1(a_0 > 0) = 0, so w_0, b_0 are n_in + 1 null
      directions; the generator v_0 = (w_0, b_0, 0) is one of them: excess n_in.
    w_zero_b_positive: node 0 is the constant relu(b_0) = b_0; grad over (b_0, q_0, c) is
      (q_0, b_0, 1), all constant: 3 parameters, 1 function: 2 null, one of them v_0: excess 1.
    shared_boundary: node 1 = 2 * node 0 in (w, b) (same boundary, same side): both nodes'
      gradients lie in span{x 1(a_0 > 0), 1(a_0 > 0)} (relu(a_0) = a_0 1(a_0 > 0) is in it):
      2 (n_in + 2) parameters, n_in + 1 functions, n_in + 3 null, minus v_0 and v_1:
      excess n_in + 1.
    dead_node: w_0 = 0, b_0 < 0: every gradient of node 0 vanishes: n_in + 2 null, minus v_0:
      excess n_in + 1.
    inactive_on_box (uniform inputs): node 0's boundary misses the box and it points away:
      as dead_node, excess n_in + 1.
    active_on_box (uniform inputs): node 0 is active on the whole box, so its gradients
      (q_0 x, q_0, a_0(x)) and c's (1) span {x_1..x_n, 1}: n_in + 3 parameters, n_in + 1
      functions, 2 null, minus v_0: excess 1.

    Args:
        n_in: the input dimension, >= 1.

    Returns:
        ``{case: excess}``, the cases of DEGENERATE_CASES in that order.
    """
    n_in = check_count(n_in, "n_in")
    return {"q_zero": n_in, "w_zero_b_positive": 1, "shared_boundary": n_in + 1, "dead_node": n_in + 1,
            "inactive_on_box": n_in + 1, "active_on_box": 1}


DEGENERATE_CASES = list(excess_counts(1))
BOX_CASES = ("inactive_on_box", "active_on_box")   # the cases that need a bounded input box


def box_excess_count(params: TwoLayer, half_width: float) -> int:
    """Hand count of the excess null directions of an otherwise generic network on the box [-a, a]^n_in.

    A node is inactive on the box iff max_box a_i = |w_i|_1 a + b_i <= 0: all its gradients
    vanish, n_in + 1 excess each.  It is fully active iff min_box a_i = b_i - |w_i|_1 a >= 0:
    k fully active nodes and c have k (n_in + 2) + 1 parameters whose gradients span only
    {x_1, .., x_n, 1}: k (n_in + 2) + 1 - (n_in + 1) null directions, minus k generators:
    k (n_in + 1) - n_in excess (for k >= 1).

    Args:
        params: one network (no batch axes), w (d, n_in).
        half_width: a > 0.

    Returns:
        The excess, an int.
    """
    check_params(params)
    check_number(half_width, "half_width")
    w, b = np.asarray(params.w), np.asarray(params.b)
    if w.ndim != 2:
        raise ValueError(f"params: expected one network, w of shape (d, n_in), got {w.shape}")
    n_in = w.shape[1]
    reach = np.abs(w).sum(1) * half_width
    inactive = int(np.sum(reach + b <= 0))
    active = int(np.sum(b - reach >= 0))
    return inactive * (n_in + 1) + (active * (n_in + 1) - n_in if active else 0)


def make_degenerate(case: str, params: TwoLayer, inputs) -> TwoLayer:
    """Node 0 of a generic network made degenerate in the named way (:func:`excess_counts`): q_0 = 0; w_0 = 0
    with b_0 > 0 or < 0; node 1 = 2 node 0; node 0's boundary moved off the box [-a, a]^n_in, pointing away from
    it or into it.

    Args:
        case: one of DEGENERATE_CASES.
        params: one network of width >= 2 (no batch axes).
        inputs: q(x); a ``UniformBox`` for the cases on the box (BOX_CASES), any otherwise.

    Returns:
        The degenerate network, of params.w's dtype.
    """
    if case not in DEGENERATE_CASES:
        raise ValueError(f"case: expected one of {DEGENERATE_CASES}, got {case!r}")
    check_params(params)
    w, b, q, c = (np.array(x, dtype=float) for x in params)
    if w.ndim != 2 or w.shape[0] < 2:
        raise ValueError(f"params: expected one network of width >= 2, w of shape (d, n_in), got {w.shape}")
    if case in BOX_CASES and not isinstance(inputs, UniformBox):
        raise ValueError(f"inputs: expected a UniformBox for case {case!r} (a Gaussian has no box), got {inputs}")
    if case == "q_zero":
        q[0] = 0.0
    elif case == "w_zero_b_positive":
        w[0], b[0] = 0.0, abs(b[0]) + 0.5
    elif case == "dead_node":
        w[0], b[0] = 0.0, -abs(b[0]) - 0.5
    elif case == "shared_boundary":
        w[1], b[1] = 2.0 * w[0], 2.0 * b[0]
    else:
        a = inputs.half_width
        direction = w[0] / np.linalg.norm(w[0])
        margin = a * np.abs(direction).sum() + 0.5
        w[0] = direction
        b[0] = -margin if case == "inactive_on_box" else margin
    return make_params(w, b, q, c, dtype=params.w.dtype)


def generic_crossing_params(key, width: int, n_in: int, half_width: float = 1.0, dtype=None) -> TwoLayer:
    """Generic parameters whose every activation boundary crosses the box [-a/2, a/2]^n_in:
    w_i ~ N(0, I), b_i = -<w_i, p_i> with p_i uniform in the box, q_i ~ N(0, 1), c ~ N(0, 1).

    Args:
        key: a PRNG key.
        width: d >= 1.
        n_in: the input dimension, >= 1.
        half_width: a > 0.
        dtype: JAX's float type (default: JAX's default).

    Returns:
        TwoLayer(w (d, n_in), b (d,), q (d,), c ()).
    """
    import jax

    width, n_in = check_count(width, "width"), check_count(n_in, "n_in")
    check_number(half_width, "half_width")
    kw, kp, kq, kc = jax.random.split(key, 4)
    w = jax.random.normal(kw, (width, n_in), dtype)
    anchor = jax.random.uniform(kp, (width, n_in), dtype, -half_width / 2, half_width / 2)
    q = jax.random.normal(kq, (width,), dtype)
    return make_params(w, -(w * anchor).sum(1), q, jax.random.normal(kc, (), dtype), dtype=dtype)
