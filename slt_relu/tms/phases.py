"""Which k-gon a parameter of the toy model of superposition sits near: labels for posterior draws and
training checkpoints, by a rule that does not depend on n.

For one parameter (W (2, c), b (c,)):

1. k = the number of columns of W longer than ``length_threshold`` (default 0.5: half the shortest
   refined k-gon length, which is 1 for k <= 4 and 1.170, 1.321, 1.448, 1.550 for k = 5, 6, 7, 8;
   ``slt_relu.tms.kgon.refine_kgon``);
2. the long columns, sorted by angle, are *regular* if every angular gap between neighbours
   (cyclically, the last to the first plus 2 pi) is within ``angle_tol * 2 pi / k`` of 2 pi / k
   (default angle_tol = 0.25), and *convex* if the polygon through them in angular order turns left
   at every vertex (k >= 3; k <= 2 counts as convex);
3. the label is the k-gon if both hold, else "none" (k = 0, no long column, is the label 0); with
   it, n_positive = the number of short columns whose bias is positive (the variant,
   ``slt_relu.tms.kgon``).

The rule is invariant under rotations and reflections of W and under feature permutations, and
``label`` vmaps over any leading batch axes of the parameters (draws, chains, checkpoints).

References:
    Chen, Lau, Mendel, Wei, Murfet 2023 (arXiv 2310.06301): the phases of the TMS posterior are
    the regions around the k-gon critical points.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..network import check_count, check_number
from ..models.tms import TMSParams

__all__ = ["NONE", "PhaseLabel", "label", "label_name", "label_names", "phase_codes", "phase_names"]

NONE = -1
"""The code of the "none of these" label."""


class PhaseLabel(NamedTuple):
    """The label of each parameter (arrays with the parameters' batch shape).

    Attributes:
        code: the k of the k-gon, or -1 (:data:`NONE`) where the long columns are not a regular
            convex polygon.
        k: the number of long columns (whether or not they form a k-gon).
        n_positive: the number of short columns with a positive bias (the variant).
        regular: whether the angular gaps are within the tolerance of 2 pi / k.
        convex: whether the long columns form a convex polygon in angular order.
    """

    code: jax.Array
    k: jax.Array
    n_positive: jax.Array
    regular: jax.Array
    convex: jax.Array


def _label_one(W, b, length_threshold, angle_tol):
    c = W.shape[-1]
    lengths = jnp.sqrt(jnp.sum(W ** 2, axis=0))
    long = lengths > length_threshold
    k = jnp.sum(long)
    theta = jnp.arctan2(W[1], W[0])
    order = jnp.argsort(jnp.where(long, theta, jnp.inf))            # the long columns first, by angle
    m = jnp.arange(c)
    valid = m < k
    kk = jnp.maximum(k, 1)
    nxt, prv = (m + 1) % kk, (m - 1) % kk
    ang = jnp.where(valid, theta[order], 0.0)
    gap = ang[nxt] - ang + jnp.where(m == k - 1, 2 * jnp.pi, 0.0)
    ideal = 2 * jnp.pi / kk
    regular = jnp.all(jnp.where(valid, jnp.abs(gap - ideal) <= angle_tol * ideal, True))
    P = W[:, order]
    e1, e2 = P - P[:, prv], P[:, nxt] - P
    turn = e1[0] * e2[1] - e1[1] * e2[0]
    convex = (k <= 2) | jnp.all(jnp.where(valid, turn > 0, True))
    code = jnp.where(regular & convex, k, NONE)
    n_positive = jnp.sum(~long & (b > 0))
    return PhaseLabel(code, k, n_positive, regular, convex)


def label(params: TMSParams, *, length_threshold: float = 0.5, angle_tol: float = 0.25) -> PhaseLabel:
    """The k-gon label of each parameter (module docstring's rule).

    Args:
        params: ``TMSParams`` with W (..., 2, c) and b (..., c); leading axes are batch axes.
        length_threshold: columns longer than this count (> 0; default 0.5).
        angle_tol: the angular gaps' tolerance relative to 2 pi / k (> 0; default 0.25).

    Returns:
        :class:`PhaseLabel` with arrays of the batch shape.

    References:
        Chen et al. 2023 (arXiv 2310.06301).
    """
    if not isinstance(params, TMSParams):
        raise TypeError(f"params: expected slt_relu.tms.TMSParams, got {type(params).__name__}")
    W, b = jnp.asarray(params.W), jnp.asarray(params.b)
    if W.ndim < 2 or W.shape[-2] != 2 or b.shape != W.shape[:-2] + W.shape[-1:]:
        raise ValueError(f"params: expected W of shape (..., 2, c) and b of shape (..., c), got {W.shape} and {b.shape}")
    check_number(length_threshold, "length_threshold")
    check_number(angle_tol, "angle_tol")
    batch = W.shape[:-2]
    flat = _label_batch(W.reshape((-1,) + W.shape[-2:]), b.reshape((-1,) + b.shape[-1:]),
                        jnp.asarray(length_threshold, W.dtype), jnp.asarray(angle_tol, W.dtype))
    return PhaseLabel(*(a.reshape(batch) for a in flat))


@jax.jit
def _label_batch(W, b, length_threshold, angle_tol):
    """:func:`_label_one` vmapped over a leading axis (one compiled program per shape)."""
    return jax.vmap(_label_one, (0, 0, None, None))(W, b, length_threshold, angle_tol)


def label_name(code: int, n_positive: int = 0, num_features: int | None = None) -> str:
    """A label's name: "none", "k-gon", or with num_features the variant, e.g. "5-gon +" for c = 6.

    Args:
        code: the label's code (k, or -1 for none).
        n_positive: the short columns with a positive bias.
        num_features: c, to spell out the variant (default: no variant).

    Returns:
        The name.
    """
    code, n_positive = int(code), int(n_positive)
    if code == NONE:
        return "none"
    name = f"{code}-gon"
    if num_features is not None and num_features > code:
        name += " " + "+" * n_positive + "-" * (num_features - code - n_positive)
    return name


def label_names(lab: PhaseLabel, num_features: int | None = None) -> np.ndarray:
    """:func:`label_name` of every entry of a :class:`PhaseLabel`.

    Args:
        lab: the labels.
        num_features: c, to spell out the variants (default: none).

    Returns:
        An object array of names with the labels' batch shape.
    """
    code, npos = np.asarray(lab.code), np.asarray(lab.n_positive)
    out = np.empty(code.shape, dtype=object)
    for idx in np.ndindex(code.shape):
        out[idx] = label_name(code[idx], npos[idx], num_features)
    return out


def phase_names(num_features: int) -> tuple[tuple[str, ...], tuple[str, ...], np.ndarray]:
    """The phases of c features: every k-gon variant, the k-gons grouped by k, and "none".

    Args:
        num_features: c >= 1.

    Returns:
        (variants, groups, group_of): variants the names ``label_name(k, n_+, c)`` for k = c, ..., 0 and
        n_+ = c - k, ..., 0 (e.g. "6-gon", "5-gon +", "5-gon -", "4-gon ++", ...), then "none";
        groups "6-gon", ..., "0-gon", "none"; group_of (len(variants),) each variant's group index.
    """
    c = check_count(num_features, "num_features")
    variants, group_of = [], []
    for g, k in enumerate(range(c, -1, -1)):
        for npos in range(c - k, -1, -1):
            variants.append(label_name(k, npos, c))
            group_of.append(g)
    groups = [f"{k}-gon" for k in range(c, -1, -1)] + ["none"]
    return tuple(variants) + ("none",), tuple(groups), np.asarray(group_of + [len(groups) - 1])


def _variant_codes(code, n_positive, c: int) -> np.ndarray:
    """Index into ``phase_names(c)[0]`` of each label (code k or -1, n_positive): arrays of one shape."""
    code, n_positive = np.asarray(code), np.asarray(n_positive)
    k = np.where(code < 0, 0, code)
    start = np.array([sum(c - kk + 1 for kk in range(c, j, -1)) for j in range(c + 1)])   # first index of k
    idx = start[k] + (c - k - n_positive)
    return np.where(code < 0, (c + 1) * (c + 2) // 2, idx)


def phase_codes(params: TMSParams, *, length_threshold: float = 0.5, angle_tol: float = 0.25,
                dead_unused: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Each parameter's phase as indices into :func:`phase_names`' variants and groups.

    The label is ``slt_relu.tms.phases.label``'s, after (with ``dead_unused``) setting to zero every column
    whose own output never fires, |W_i|^2 + b_i <= 0 (ReLU(mu |W_i|^2 + b_i) = 0 for every mu in [0, 1]).
    Such a feature is not reconstructed at all: it is an unused feature of the negative variant whatever
    its length, for the loss is flat along (W_u, b_u) in the "-" variants' valley as long as the
    pre-activations stay negative, so that under the prior a column of length up to sqrt(-b_u) drifts
    there (at n = 445 with s = 1, a sixth of all the particles of one data set have such a column
    longer than 0.5, which the length rule alone would count as a sixth side of an irregular polygon:
    "none").

    Args:
        params: TMSParams with W (..., 2, c), b (..., c).
        length_threshold, angle_tol: the labelling rule's (``slt_relu.tms.phases.label``).
        dead_unused: count the columns whose output never fires as unused (default True).

    Returns:
        (variant codes, group codes), int arrays of the batch shape.
    """
    if not isinstance(params, TMSParams):
        raise ValueError(f"params: expected slt_relu.tms.TMSParams, got {type(params).__name__}")
    W, b = jnp.asarray(params.W), jnp.asarray(params.b)
    if dead_unused:
        dead = jnp.sum(W ** 2, axis=-2) + b <= 0
        W = jnp.where(dead[..., None, :], 0.0, W)
    lab = label(TMSParams(W, b), length_threshold=length_threshold, angle_tol=angle_tol)
    c = W.shape[-1]
    codes = _variant_codes(lab.code, lab.n_positive, c)
    return codes, phase_names(c)[2][codes]
