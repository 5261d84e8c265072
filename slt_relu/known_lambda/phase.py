"""The learning coefficient of one phase of W0 of a two-layer ReLU network, from the free-energy curve of a local
potential on a region that does not move with t (the ``dslt_phase`` family of the ``lambda_curve`` kind).

For a truth f0 (``slt_relu.truths``: DSLT4's PT1 and PT2), a model width d and a phase a of its true set W0 (a
label of ``slt_relu.phases.true_set_representatives``, whose representative w_a is the point ``llc_dslt4_phases``
runs SGLD at), the phase's local free energy on a fixed region U_a is

    Z_a(t) = int_{|z| <= R} phi(z) exp(-t (K(w_a + E z) - K(w_a))) dz  ~  C t^(-lambda_a) (log t)^(m_a - 1),
    phi = N(0, s^2 I),

K the exact population loss (``slt_relu.population_loss``: exact on a uniform input box; the truth in its
irreducible form, the same function), R = ``radius`` and s = ``prior_std`` of the case.  U_a does not move with
t, so the slope of F_a(t) = -log Z_a(t) in log t over the last decades is lambda_a: ``slt_relu.posterior.
free_energy_curve`` fits it, as for the other families (a phase's mass under a posterior at one n beta lives
on a region that moves with n beta, so its slope mixes lambda with the region's change).  E (D, k) maps the
sampler's coordinates z to parameter offsets:

- **gauge**: for every non-degenerate node i of w_a (q_i w_i != 0) the input weight of largest |w_ik| is pinned
  at its value, a slice through the node's scaling orbit (w_i, b_i, q_i) -> (a w_i, a b_i, q_i / a).  K is constant
  along the orbits and the slice crosses each transversally (the orbit's tangent has w_ik != 0 in that slot), so
  near w_a the parameter space is the slice times the orbits and lambda of the slice is lambda of K.  Left free,
  the curved orbits spread the particles over the prior's width while the other directions narrow as t^(-1/2),
  which SMC's HMC moves (a diagonal mass matrix) cannot follow;
- **rotation**: the free coordinates are rotated into the eigenbasis of the Fisher information restricted to
  them at w_a.  The map is orthogonal, so the isotropic prior and the ball, and Z_a, are unchanged; the stiff and
  the flat directions become the axes that the diagonal mass matrix scales apart (PT1's two nodes on one boundary
  have a flat direction along q_1 + q_2 = const, diagonal in the raw coordinates).

Outside the ball the potential is a wall of ``WALL`` (exp(-t) at the fitted t removes it), so no other part of
parameter space takes over at large t.  What the ball holds is checked where it matters: a region holding a
phase of lower lambda loses its particles to it as t grows, so the final particles of every run are classified
(``slt_relu.classify_phase`` at the resolution of n = t_max) and the fraction in phase a is reported
(:func:`final_phases`).  K >= 0 and K(w_a) = 0 (1e-32, rounding), so no point of the region has a lower loss.

The first-principles value (:func:`first_principles`) is ``slt_relu.known_lambda.two_layer_phase`` of the label (one node per truth boundary:
the minimal network's (D' - d') / 2; a pair of nodes on one boundary: + n_in / 3; a degenerate node on the box:
+ 0), given where the Fisher rank at w_a equals the count's and the label is of a covered shape.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import values

__all__ = ["PhaseCase", "PhaseLoss", "final_phases", "first_principles", "phase_case"]

WALL = 1.0                   # K - K(w_a) outside the ball: t * 1 at the fitted t is a wall


class PhaseLoss(NamedTuple):
    """K(w_a + E z) - K(w_a) on the sampler's coordinates z (k,) inside |z| <= radius, WALL outside (module
    docstring).  Hashable (static in jit): one compiled program per case.

    Fields: truth ((w rows), (b), (q), c) of the irreducible truth; width, the model's d; inputs, the UniformBox
    q(x); sigma; center, w_a flat (D,); embed, E as D rows of k; radius; loss_star, K(w_a)."""

    truth: tuple
    width: int
    inputs: object
    sigma: float
    center: tuple
    embed: tuple
    radius: float
    loss_star: float

    def __call__(self, z, data):
        import jax.numpy as jnp

        from ..loss import population_loss
        from ..network import TwoLayer, from_flat

        dt = z.dtype
        w = jnp.asarray(self.center, dt) + jnp.asarray(self.embed, dt) @ z
        truth = TwoLayer(*(jnp.asarray(a, dt) for a in self.truth))
        K = population_loss(from_flat(w, self.width, self.inputs.n_in), truth, self.inputs, self.sigma)
        return jnp.where(z @ z <= self.radius ** 2, K - self.loss_star, WALL)

    def params(self, z):
        """The TwoLayer of sampler coordinates z (..., k) (NumPy, float64), leading axes kept."""
        from ..network import TwoLayer

        z = np.asarray(z, np.float64)
        flat = np.asarray(self.center) + z @ np.asarray(self.embed).T
        d, n = self.width, self.inputs.n_in
        return TwoLayer(flat[..., : d * n].reshape(flat.shape[:-1] + (d, n)), flat[..., d * n: d * (n + 1)],
                        flat[..., d * (n + 1): d * (n + 2)], flat[..., -1])


class PhaseCase(NamedTuple):
    """A phase's local potential: its loss, the sampler's dimension k, the first-principles (lambda, m) or
    (None, None), and what describes the region (:func:`phase_case`)."""

    loss: PhaseLoss
    num_params: int
    lambda_exact: float | None
    m_exact: int | None
    info: dict


def _truth_tuple(truth) -> tuple:
    w, b, q, c = (np.asarray(a, np.float64) for a in truth)
    return tuple(map(tuple, w.tolist())), tuple(b.tolist()), tuple(q.tolist()), float(c)


def first_principles(label, n_in: int, rank: int) -> tuple[float | None, int | None, str]:
    """(lambda, m, the rule in words) of a phase label from ``known_lambda.two_layer_phase``, or (None, None, why
    not) for a shape the count does not cover or a Fisher rank at the representative other than the count's.

    Args:
        label: a ``slt_relu.phases.PhaseLabel``.
        n_in: the input dimension.
        rank: the Fisher rank at the phase's representative.
    """
    m = len(label.truth)
    if label.hidden or label.linear or any(a + r > 2 or (a and r) for a, r in label.truth):
        return None, None, "not covered by known_lambda.two_layer_phase (hidden groups, linear nodes, three nodes " \
                           "or a pair of opposite orientations on one boundary)"
    minimal = m * (n_in + 1) + 1
    if rank != minimal:
        return None, None, f"the Fisher rank at the representative is {rank}, not the count's {minimal}"
    pairs = sum(a + r == 2 for a, r in label.truth)
    lam, mult = values.two_layer_phase(n_in, m, pairs, label.degenerate, bounded_inputs=True)
    minimal_lambda = float(values.minimal_two_layer_relu(n_in, m)[0])
    words = [f"{m} truth node{'s' * (m > 1)} carried: (D' - d') / 2 = {minimal_lambda:g} (Fisher rank {rank})"]
    if pairs:
        words.append(f"{pairs} pair{'s' * (pairs > 1)} on one boundary: + {pairs} x {n_in}/3")
    if label.degenerate:
        words.append(f"{label.degenerate} degenerate node{'s' * (label.degenerate > 1)}, dead on the box in an open "
                     "set: + 0")
    return float(lam), mult, "; ".join(words)


def phase_case(truth, inputs, sigma: float, width: int, phase: str, radius: float) -> PhaseCase:
    """The local potential of one phase of W0 (module docstring): the phase's representative, gauge slice, rotation,
    loss and first-principles value.

    Args:
        truth: the truth f0, a ``TwoLayer`` (its irreducible form is used: the same function).
        inputs: q(x), a ``UniformBox`` of n_in <= 2 (K exact there).
        sigma: the noise's standard deviation.
        width: the model's hidden nodes d.
        phase: the phase's label as ``slt_relu.phases`` prints it (e.g. "+ | 1 degenerate").
        radius: the region's ball |z| <= radius.

    Returns:
        PhaseCase, whose ``info`` holds width, label, kind, radius, num_params_full (D), pinned (the gauge's slots),
        fisher_rank, fisher_eigenvalues (restricted to the free coordinates), loss_at_center, lambda_rule.
        ValueError naming the argument at fault (``truth`` for a truth that cannot be reduced).
    """
    import jax.numpy as jnp

    from ..fisher import fisher_information, fisher_rank
    from ..inputs import UniformBox
    from ..loss import population_loss
    from ..network import check_number, to_flat
    from ..phases import reduced_truth, true_set_representatives

    if not isinstance(inputs, UniformBox) or inputs.n_in > 2:
        raise ValueError(f"inputs: expected a UniformBox of n_in <= 2 (K exact there), got {inputs}")
    sigma, radius = float(check_number(sigma, "sigma")), float(check_number(radius, "radius"))
    try:
        truth = reduced_truth(truth)
    except ValueError as err:
        raise ValueError(f"truth: {err}") from None
    reps = true_set_representatives(truth, width)           # ValueError naming width
    by_label = {str(rep.label): rep for rep in reps}
    if phase not in by_label:
        raise ValueError(f"phase: expected one of {sorted(by_label)} (the phases of W0 at width {width}), "
                         f"got {phase!r}")
    rep = by_label[phase]
    p = rep.params.__class__(*(jnp.asarray(a, jnp.float64) for a in rep.params))
    w, q = np.asarray(p.w), np.asarray(p.q)
    n_in, D = w.shape[1], len(to_flat(p))
    pinned = [i * n_in + int(np.argmax(np.abs(w[i]))) for i in range(width) if abs(q[i]) * np.linalg.norm(w[i]) > 0]
    free = [j for j in range(D) if j not in pinned]
    fisher = np.asarray(fisher_information(p, inputs, sigma), np.float64)[np.ix_(free, free)]
    evals, rot = np.linalg.eigh(fisher)
    embed = np.zeros((D, len(free)))
    embed[free] = rot
    loss_star = float(population_loss(p, truth, inputs, sigma))
    rank = int(fisher_rank(p, inputs, sigma))
    lam, mult, rule = first_principles(rep.label, n_in, rank)
    loss = PhaseLoss(_truth_tuple(truth), width, inputs, sigma, tuple(np.asarray(to_flat(p)).tolist()),
                     tuple(map(tuple, embed.tolist())), radius, loss_star)
    info = {"width": width, "label": phase, "kind": rep.label.kind, "radius": radius, "num_params_full": D,
            "pinned": [f"w[{j // n_in},{j % n_in}]" for j in pinned], "fisher_rank": rank,
            "fisher_eigenvalues": evals.tolist(), "loss_at_center": loss_star, "lambda_rule": rule}
    return PhaseCase(loss, len(free), lam, mult, info)


def final_phases(loss: PhaseLoss, particles, t_max: float) -> dict:
    """{phase name: fraction} of the final particles (R, N, k) of SMC's runs on ``loss``, pooled, by
    ``slt_relu.classify_phase`` at the resolution of n = t_max data points (beta = 1: n beta = t_max); the fraction
    in the potential's own phase is ``fractions[label]`` (0 where none)."""
    from ..classify import classify_phase
    from ..network import TwoLayer

    z = np.asarray(particles, np.float64).reshape(-1, np.shape(particles)[-1])
    truth = TwoLayer(*(np.asarray(a, np.float64) for a in loss.truth))
    labels = classify_phase(loss.params(z), truth, inputs=loss.inputs, n=max(int(round(t_max)), 1),
                            sigma=loss.sigma).label
    names, counts = np.unique([str(lab) for lab in labels.ravel()], return_counts=True)
    return {str(k): float(c) / len(z) for k, c in zip(names, counts)}
