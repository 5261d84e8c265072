"""Named truth networks with their input distributions (DSLT3 examples, m-symmetric truths).

``m_symmetric(m, bias, q, c)``: node k has direction (cos(pi/m), sin(pi/m)) rotated
clockwise by 2 pi k / m, k = 0..m-1 (DSLT3 "General case"; Carroll 2021, 4.5); the
directions sum to zero, so all nodes annihilate.

:func:`get` returns an :class:`Example`: the truth, q(x), sigma, the (restricted) model
the example studies, and where known the true set W0 in the free coordinates.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from .inputs import UniformBox
from .network import Restriction, TwoLayer, make_params, pad_nodes

__all__ = ["Example", "dslt4_pt1", "dslt4_pt2", "from_params", "get", "m_symmetric", "names"]


def m_symmetric(m: int, bias: float = -0.3, q: float = 1.0, c: float = 0.0, dtype=None) -> TwoLayer:
    """The m-symmetric truth: w_k = (cos theta_k, sin theta_k), theta_k = pi/m - 2 pi k/m,
    b_k = bias, q_k = q, c.  Shapes w: (m, 2), b, q: (m,)."""
    if not (isinstance(m, int) and m >= 1):
        raise ValueError(f"m: expected a positive integer, got {m!r}")
    theta = np.pi / m - 2 * np.pi * np.arange(m) / m
    w = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    return make_params(w, bias, q, c, dtype=dtype)


class Example(NamedTuple):
    """A named setup: truth f0, input distribution q(x), noise sigma, the model studied
    (a Restriction whose base has the model's width), and W0 in the free coordinates.

    true_set(box, num) -> list of curves (each (num, k) points in the free coordinates)
    lying in W0 inside box = ((x0, x1), (y0, y1)); None where W0 is not drawn.
    markers: named points of W0 in the free coordinates (e.g. degenerate ends).
    """

    name: str
    truth: TwoLayer
    inputs: object
    sigma: float
    model: Restriction
    true_set: Callable | None
    markers: dict
    description: str


def _example_3_1():
    truth = make_params([[1, 0], [0, 1], [-1, 0], [0, -1]], -1.0, 1.0, 0.0)
    return Example("dslt3_example_3_1", truth, UniformBox(2.0, 2), 1.0, Restriction.full(truth), None, {},
                   "DSLT3 Example 3.1: relu(x1-1)+relu(x2-1)+relu(-x1-1)+relu(-x2-1); q(x) uniform on [-2,2]^2")


def _example_3_2(theta0: float = 0.2):
    """f(x) = q relu(w x), f0 = theta0 relu(x); q(x) uniform on [-sqrt3, sqrt3], sigma^2 = 1/4:
    K = (wq - theta0)^2 for w >= 0 (and (wq)^2 + theta0^2 for w < 0)."""
    if theta0 < 0:
        raise ValueError(f"theta0: expected a number >= 0, got {theta0!r}")
    truth = make_params([[1.0]], 0.0, theta0, 0.0)
    base = make_params([[1.0]], 0.0, theta0, 0.0)
    model = Restriction.from_names(base, ["w[0,0]", "q[0]"])

    def true_set(box, num=200):
        (x0, x1), (y0, y1) = box
        if theta0 == 0:
            curves = [np.stack([np.linspace(x0, x1, num), np.zeros(num)], 1)]
            if x0 < 0:
                curves.append(np.stack([np.zeros(num), np.linspace(y0, y1, num)], 1))
            return curves
        lo = max(x0, theta0 / y1 if y1 > 0 else np.inf, 1e-9)
        if lo >= x1:
            return []
        a = np.geomspace(lo, x1, num)
        return [np.stack([a, theta0 / a], 1)]

    return Example("dslt3_example_3_2", truth, UniformBox(math.sqrt(3.0), 1), 0.5, model, true_set, {},
                   f"DSLT3 Example 3.2: the scaling valley wq = {theta0} of q relu(wx) vs {theta0} relu(x)")


def _example_3_3():
    truth = make_params([[1.0], [-1.0]], [-1.0, -1.0], [1.0, 1.0], 2.0)
    return Example("dslt3_example_3_3", truth, UniformBox(2.0, 1), 1.0, Restriction.full(truth), None, {},
                   "DSLT3 Example 3.3: relu(x-1)+relu(-x-1)+2, equal to relu(-x+1)+relu(x+1)")


def _example_3_4():
    """f = relu(w1 x) + relu(w2 x), f0 = relu(x); q uniform on [-sqrt6, sqrt6], sigma^2 = 1/2."""
    truth = make_params([[1.0]], 0.0, 1.0, 0.0)
    base = make_params([[1.0], [0.0]], [0.0, 0.0], [1.0, 1.0], 0.0)
    model = Restriction.from_names(base, ["w[0,0]", "w[1,0]"])

    def true_set(box, num=200):
        s = np.linspace(0.0, 1.0, num)
        return [np.stack([s, 1.0 - s], 1)]

    markers = {"degenerate (1, 0)": (1.0, 0.0), "degenerate (0, 1)": (0.0, 1.0), "non-degenerate (1/2, 1/2)": (0.5, 0.5)}
    return Example("dslt3_example_3_4", truth, UniformBox(math.sqrt(6.0), 1), math.sqrt(0.5), model, true_set,
                   markers, "DSLT3 Example 3.4: relu(w1 x) + relu(w2 x) vs relu(x); W0 = {w1 + w2 = 1, w >= 0}")


def _m_symmetric_example(m: int = 3, bias: float = -0.3, q: float = 1.0, c: float = 0.0, width: int | None = None,
                         input_half_width: float = 1.0):
    truth = m_symmetric(m, bias, q, c)
    width = m if width is None else width
    if width < m:
        raise ValueError(f"width: expected at least m = {m} nodes, got {width}")
    base = pad_nodes(truth, width)
    return Example(f"m_symmetric_{m}", truth, UniformBox(input_half_width, 2), 1.0, Restriction.full(base), None, {},
                   f"{m}-symmetric truth (DSLT3/DSLT4), bias {bias}, q {q}; inputs uniform on [-{input_half_width}, {input_half_width}]^2")


def dslt4_pt1(t: float = 1.0) -> TwoLayer:
    """DSLT4's first phase transition (node degeneracy): w1 = (cos t, sin t), w2 = (-cos t, sin t),
    b = -0.3, q = 1, c = 0.  As t -> pi/2 the two boundaries merge; at t = pi/2 the truth is
    2 relu(x2 - 0.3), which one node expresses (the other degenerate)."""
    w = np.array([[math.cos(t), math.sin(t)], [-math.cos(t), math.sin(t)]])
    return make_params(w, -0.3, 1.0, 0.0)


def dslt4_pt2(v: float = 1.0) -> TwoLayer:
    """DSLT4's second phase transition (orientation reversal): the 3-symmetric truth (bias -0.3)
    with the output weight of its third node, direction (-1, 0), set to v.  At v = 1 the three
    nodes annihilate (sum q_i w_i = 0) and the orientation-reversed network is a true
    parameter; for v != 1 it is not."""
    truth = m_symmetric(3, -0.3, 1.0, 0.0)
    return truth._replace(q=truth.q.at[2].set(v))


def _dslt4_example(name, truth, description):
    return Example(name, truth, UniformBox(1.0, 2), 1.0, Restriction.full(truth), None, {}, description)


def _dslt4_pt1_example(t: float = 1.0):
    return _dslt4_example("dslt4_pt1", dslt4_pt1(t), f"DSLT4 PT1 (node degeneracy): w = (+-cos t, sin t), t = {t:.4g}, "
                          "b = -0.3, q = 1; inputs uniform on [-1, 1]^2, sigma = 1")


def _dslt4_pt2_example(v: float = 1.0):
    return _dslt4_example("dslt4_pt2", dslt4_pt2(v), f"DSLT4 PT2 (orientation reversal): 3-symmetric truth, third output "
                          f"weight v = {v:.4g}; inputs uniform on [-1, 1]^2, sigma = 1")


def from_params(truth: TwoLayer, *, width: int | None = None, name: str = "custom", description: str = "",
                inputs=None, sigma: float = 1.0) -> Example:
    """An Example of any two-layer truth: a researcher's own, with the model studied at ``width`` nodes.

    The model is the full two-layer network of ``width`` nodes (default: the truth's m), whose base is the truth
    padded with zero nodes (w = 0, b = 0, q = 0); q(x) is ``inputs`` (default: uniform on [-1, 1]^n_in, as DSLT4)
    and sigma the noise (default 1).

    Args:
        truth: the truth f0 (a ``TwoLayer``: w (m, n_in), b (m,), q (m,), c ()).
        width: the model's nodes d >= m.
        name, description: the Example's name and one-line description.

    Returns:
        the Example (no true set drawn, no markers).

    Raises:
        ValueError: ``width`` below the truth's nodes, or a non-finite parameter.
    """
    m, n_in = truth.width, truth.n_in
    width = m if width is None else width
    if not (isinstance(width, (int, np.integer)) and width >= m):
        raise ValueError(f"width: expected an integer >= the truth's {m} nodes, got {width!r}")
    if not all(np.isfinite(np.asarray(leaf)).all() for leaf in truth):
        raise ValueError("truth: expected finite parameters w, b, q, c")
    base = pad_nodes(truth, width)
    inputs = UniformBox(1.0, n_in) if inputs is None else inputs
    return Example(name, truth, inputs, float(sigma), Restriction.full(base), None, {},
                   description or f"{name}: a truth of {m} nodes on {n_in} inputs, model width {width}")


REGISTRY: dict[str, Callable[..., Example]] = {
    "dslt3_example_3_1": _example_3_1,
    "dslt3_example_3_2": _example_3_2,
    "dslt3_scaling_valley": _example_3_2,
    "dslt3_example_3_3": _example_3_3,
    "dslt3_example_3_4": _example_3_4,
    "m_symmetric": _m_symmetric_example,
    "dslt4_pt1": _dslt4_pt1_example,
    "dslt4_pt2": _dslt4_pt2_example,
}


def names() -> list[str]:
    """The names :func:`get` accepts, sorted.

    Returns:
        The registered truths' names.
    """
    return sorted(REGISTRY)


def get(name: str, **kwargs) -> Example:
    """The named example; kwargs are its options (e.g. ``theta0`` for Example 3.2, ``m`` for m_symmetric)."""
    if name not in REGISTRY:
        raise ValueError(f"truth {name!r}: expected one of {', '.join(names())}")
    import inspect

    allowed = set(inspect.signature(REGISTRY[name]).parameters)
    unknown = set(kwargs) - allowed
    if unknown:
        raise ValueError(f"truth {name!r}: unknown option(s) {sorted(unknown)}; expected some of {sorted(allowed) or 'none'}")
    return REGISTRY[name](**kwargs)


