"""What singular learning reads from the landscape: the Hessian's rank r at a true parameter w0 beside 2 lambda.

At a minimum w0 of K >= 0 with Hessian H of rank r in d parameters the splitting lemma writes K locally as
y_1^2 + ... + y_r^2 + g(y_(r+1), ..., y_d), g with no terms of order <= 2, so lambda = r / 2 + lambda(g) and

    r  <=  2 lambda  <=  d          (analytic K: 2 lambda <= (d + r) / 2, as g >= 0 starts at order >= 4)

(docs/concepts/hessian_and_lambda.md).  For every case below the script takes the Hessian of the population loss
K at w0 in float64 (``slt_relu.hessian.hessian``; its rank by ``rank_of_symmetric``, rtol = d eps) and prints a
markdown table: d, r, 2 lambda and m (``slt_relu.known_lambda.values``; at a point where K is Morse-Bott, the local
value r / 2), d - r, and what K does along the d - r null directions of H, through the remainder

    g(v, t) = min_z K(w0 + t v + E z),   E the r stiff eigenvectors of H    (Newton's method in z from z = 0)

(the splitting lemma's g along v, up to a change of coordinates; 0 where v is tangent to W0, a scaling orbit or a
curved true set, which the minimisation follows):

- flat: the null directions g does not depend on (``analyse``: the spread of grad_v log g over random null
  directions, scale-free; a direction along which it grows in proportion to t enters g only through the
  curvature of an orbit), with how many of them are flat on the straight line too (K(w0 + t v) = 0 to rounding
  at t = 0.1, 0.25, 0.5: K <= 1e-16 s t^2, s the largest eigenvalue of H, 1 where H = 0) and the order k of
  K(w0 + t v) ~ t^k on the line for the others (4 on a curved orbit's tangent);
- not flat: the others, and the order k of g(v, t) ~ t^k along them (the log-log slope over t = 1e-3 .. 1e-1).

Cases: normal crossings, a regular model, reduced-rank regression and deep linear networks (at the true set's
deepest point, ``ProductLoss.true_point``, where the known lambda is the local one, and at a point of W0 with
full-rank layers, where K is Morse-Bott), two-layer ReLU networks (minimal truths; phases of W0 that
``known_lambda.two_layer_phase`` covers) and a teacher-student ReLU MLP.  The ReLU networks' K is the exact
population loss on a uniform box; its Hessian is taken with the exact quadrature rule of the point held fixed
(at a true parameter the same matrix as the Fisher information; differentiating through the 2-D rule's cut
geometry, whose lines coincide with the truth's there, gives a wrong Hessian).

    .venv/bin/python benchmarks/hessian_rank_vs_lambda.py [--figure docs/_static/hessian_rank_vs_lambda.png]
                                                          [--only SUBSTRING]

(about 2 minutes on a 2-core CPU, most of it compiling.)
"""
from __future__ import annotations

import argparse
import os
import time
from fractions import Fraction
from functools import partial
from typing import NamedTuple

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from slt_relu import truths  # noqa: E402
from slt_relu.fisher import fisher_rank  # noqa: E402
from slt_relu.hessian import hessian, rank_of_symmetric  # noqa: E402
from slt_relu.inputs import UniformBox, expectation_rule  # noqa: E402
from slt_relu.known_lambda import losses, values  # noqa: E402
from slt_relu.known_lambda.phase import first_principles  # noqa: E402
from slt_relu.mlp import flatten_mlp, init_mlp, mlp_forward, unflatten_mlp  # noqa: E402
from slt_relu.network import TwoLayer, forward, from_flat, to_flat  # noqa: E402
from slt_relu.phases import true_set_representatives  # noqa: E402

T_SLOPE = np.geomspace(1e-3, 1e-1, 5)          # the order k of K ~ t^k: the log-log slope over these t
T_LINE = np.array([0.1, 0.25, 0.5])            # flat on the line: K = 0 to rounding at these t
T_CURVE = np.array([0.05, 0.1, 0.2])           # flat on W0: g = 0 to rounding at these t
PROBE_T = ((0.001, 0.004), (0.01, 0.04), (0.025, 0.1), (0.05, 0.2))   # pairs of t for g's gradient (analyse)
PROBE_FLOOR = 1e-16                            # ... the first pair where g > PROBE_FLOOR s (an accurate gradient)
TS = np.unique(np.concatenate([T_SLOPE, T_LINE, T_CURVE, np.ravel(PROBE_T)]))
FLAT_RTOL = 1e-16                              # "0 to rounding": K <= FLAT_RTOL s t^2 (module docstring)
SLOPE_FLOOR = 1e-26                            # the slope uses the t where K > SLOPE_FLOOR s (rounding: ~1e-32 s)
NEWTON_STEPS = 20                              # Newton steps of g's minimisation (quadratic convergence: ample)
STEP_SIZES = np.array([1.0, 0.5, 0.25, 0.1, 0.01])
LEAK_RATIO = 2.0                               # flat: grad log g grows by more than this over a PROBE_T pair
NEGLIGIBLE = 1e-4                              # ... or its spread is below this part of the largest
LEAK_GAIN = 1e-9                               # a flat direction's g: below rounding or this part of K on the line


# ----------------------------------------------------------------------------------------------------------------
# losses: loss(w, rule) with the point's rule (loss.rule(w, data)) held fixed; K(w) = loss(w, loss.rule(w, data))


class Known(NamedTuple):
    """A ``known_lambda.losses`` population loss K(w, None) of flat w (no rule)."""

    K: object

    def rule(self, w, data):
        return None

    def __call__(self, w, rule):
        return self.K(w, None)


class TwoLayerK(NamedTuple):
    """The exact population loss K(w) = E_q[(f(x, w) - f0(x))^2] / (2 sigma^2) of a two-layer ReLU network of flat
    w on a uniform box; the rule is ``expectation_rule`` of the point and the truth (exact there), held fixed."""

    truth: tuple            # ((w rows), (b), (q), c)
    width: int
    inputs: UniformBox
    sigma: float

    def _truth(self, dtype):
        w, b, q, c = self.truth
        return TwoLayer(jnp.asarray(w, dtype), jnp.asarray(b, dtype), jnp.asarray(q, dtype), jnp.asarray(c, dtype))

    def rule(self, w, data):
        params = from_flat(w, self.width, self.inputs.n_in)
        return jax.lax.stop_gradient(expectation_rule(self.inputs, params, self._truth(w.dtype)))

    def __call__(self, w, rule):
        diff = forward(from_flat(w, self.width, self.inputs.n_in), rule.points) - forward(self._truth(w.dtype),
                                                                                           rule.points)
        return jnp.sum(rule.weights * diff ** 2) / (2.0 * self.sigma ** 2)


class SampleK(NamedTuple):
    """K_n(w) = mean_k (f(x_k, w) - f_T(x_k))^2 / 2 of an MLP of flat w on a fixed sample, data = (x, f_T(x))."""

    widths: tuple

    def rule(self, w, data):
        return data

    def __call__(self, w, rule):
        x, y = rule
        return 0.5 * jnp.mean((mlp_forward(unflatten_mlp(w, self.widths), x)[:, 0] - y) ** 2)


def truth_tuple(p) -> tuple:
    w, b, q, c = (np.asarray(a, np.float64) for a in p)
    return tuple(map(tuple, w.tolist())), tuple(b.tolist()), tuple(q.tolist()), float(c)


# ----------------------------------------------------------------------------------------------------------------
# cases


class Case(NamedTuple):
    name: str
    loss: object
    w0: np.ndarray
    data: object
    lam: Fraction | None       # lambda at w0 (None: not known)
    m: int | None
    source: str                # where lambda comes from
    analytic: bool             # K analytic (the bound 2 lambda <= (d + r) / 2 applies)
    hidden: int | None = None  # ReLU hidden nodes (scaling symmetries)


def crossing_cases() -> list[Case]:
    out = []
    for k, kind, label in [((1, 1), "product", "w1^2 w2^2"), ((1, 2), "product", "w1^2 w2^4"),
                           ((2, 3), "product", "w1^4 w2^6"), ((1, 0), "product", "w1^2 (w2 free)"),
                           ((1, 2), "sum", "w1^2 + w2^4"), ((1, 1, 3), "sum", "w1^2 + w2^2 + w3^6")]:
        lam, m = values.normal_crossing(k, kind)
        K = losses.PolynomialLoss("normal_crossing" if kind == "product" else "sum", k)
        out.append(Case(f"normal crossing {label}", Known(K), K.true_point(), None, lam, m,
                        f"normal_crossing({k}, {kind!r})", True))
    K, _ = losses.family_loss("regular", jax.random.PRNGKey(0), 4)
    lam, m = values.regular(4)
    out.append(Case("regular, d = 4", Known(K), K.true_point(), None, lam, m, "regular(4)", True))
    return out


def full_rank_point(widths, target, key) -> np.ndarray:
    """A point of W0 = {W_L ... W_1 = C0} whose layers have full rank (widths (H_0, ..., H_L) with H_(L-1) > H_0
    and H_L <= rank C0 + H_(L-1) - H_0): random W_1 .. W_(L-1), then W_L = C0 P^+ + Y (I - P P^+) with
    P = W_(L-1) ... W_1 (full column rank H_0, so W_L P = C0) and Y random (W_L of full rank)."""
    C0 = np.asarray(target, np.float64)
    rng = np.random.default_rng(key)
    layers = [rng.standard_normal((b, a)) for a, b in zip(widths[:-2], widths[1:-1])]
    P = layers[0]
    for W in layers[1:]:
        P = W @ P
    Pp = np.linalg.pinv(P)
    WL = C0 @ Pp + rng.standard_normal((widths[-1], widths[-2])) @ (np.eye(widths[-2]) - P @ Pp)
    flat = np.concatenate([W.ravel() for W in layers + [WL]])
    return flat


def linear_cases() -> list[Case]:
    out = []
    key = jax.random.PRNGKey(1)
    for (i, h, o, r0) in [(2, 1, 2, 0), (3, 3, 3, 0), (3, 2, 3, 1), (2, 3, 2, 1), (4, 2, 3, 2)]:
        lam, m, D, layers = losses.family_lambda("reduced_rank", input_dim=i, hidden=h, output_dim=o, true_rank=r0)
        K, _ = losses.family_loss("reduced_rank", key, D, layers, true_rank=r0)
        where = "at 0" if r0 == 0 else "deepest point"
        out.append(Case(f"reduced rank {i}-{h}-{o}, rank {r0}, {where}", Known(K), K.true_point(), None, lam, m,
                        f"reduced_rank{(i, h, o, r0)}", True))
    for (H0, widths, r0) in [(2, (2, 2, 2), 0), (2, (3, 3, 2), 1)]:
        lam, m, D, layers = losses.family_lambda("deep_linear", input_dim=H0, widths=widths, true_rank=r0)
        K, _ = losses.family_loss("deep_linear", key, D, layers, true_rank=r0)
        where = "at 0" if r0 == 0 else "deepest point"
        name = "-".join(map(str, layers))
        out.append(Case(f"deep linear {name}, rank {r0}, {where}", Known(K), K.true_point(), None, lam, m,
                        f"deep_linear({H0}, {widths}, {r0})", True))
    # points of W0 with full-rank layers: the product map is a submersion there (rank of its differential
    # H_0 H_L, locally constant), so K = |P(w) - C0|^2 / 2 is Morse-Bott: local lambda = r / 2, m = 1
    for family, layers, r0 in [("reduced_rank", (2, 3, 2), 1), ("deep_linear", (2, 3, 3, 2), 1)]:
        if family == "reduced_rank":
            lam_g, m_g, D, _ = losses.family_lambda(family, input_dim=2, hidden=3, output_dim=2, true_rank=r0)
        else:
            lam_g, m_g, D, _ = losses.family_lambda(family, input_dim=2, widths=layers[1:], true_rank=r0)
        K, _ = losses.family_loss(family, key, D, layers, true_rank=r0)
        w0 = full_rank_point(layers, K.target, 7)
        r_local = layers[0] * layers[-1]
        label = "reduced rank" if family == "reduced_rank" else "deep linear"
        out.append(Case(f"{label} {'-'.join(map(str, layers))}, rank {r0}, full-rank point of W0", Known(K), w0,
                        None, Fraction(r_local, 2), 1,
                        f"local (Morse-Bott); the deepest point's {lam_g}", True))
    return out


def two_layer_cases() -> list[Case]:
    f64 = lambda p: jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), p)
    out = []
    ex33 = truths.get("dslt3_example_3_3")
    m3 = f64(truths.m_symmetric(3))
    for name, truth, inputs, sigma in [("DSLT3 Example 3.3 truth (1-D, 2 nodes)", f64(ex33.truth), ex33.inputs,
                                        ex33.sigma),
                                       ("3-symmetric truth (2-D, 3 nodes)", m3, UniformBox(1.0, 2), 1.0)]:
        width, n_in = truth.w.shape
        lam, m = values.minimal_two_layer_relu(n_in, width)
        out.append(Case(f"two-layer ReLU, minimal: {name}", TwoLayerK(truth_tuple(truth), width, inputs, sigma),
                        np.asarray(to_flat(truth)), None, lam, m, f"minimal_two_layer_relu({n_in}, {width})", False,
                        width))
    ex34 = truths.get("dslt3_example_3_4")
    pt1 = f64(truths.dslt4_pt1(1.0))
    for tname, truth, inputs, sigma, width, labels in [
            ("relu(x) (DSLT3 Ex. 3.4's truth)", f64(ex34.truth), ex34.inputs, ex34.sigma, 2,
             ("++", "+ | 1 degenerate")),
            ("DSLT4 PT1 truth (2-D)", pt1, UniformBox(1.0, 2), 1.0, 3, ("++ +", "+ + | 1 degenerate"))]:
        n_in = truth.w.shape[1]
        reps = {str(rep.label): rep for rep in true_set_representatives(truth, width)}
        loss = TwoLayerK(truth_tuple(truth), width, inputs, sigma)
        for label in labels:
            rep = reps[label]
            p = f64(rep.params)
            lam, m, rule = first_principles(rep.label, n_in, int(fisher_rank(p, inputs, sigma)))
            if lam is None:
                raise RuntimeError(f"{tname} {label}: {rule}")
            lam = values.two_layer_phase(n_in, len(rep.label.truth), sum(a + b == 2 for a, b in rep.label.truth),
                                         rep.label.degenerate)[0]
            out.append(Case(f"two-layer ReLU, width {width}, phase '{label}' of {tname}", loss,
                            np.asarray(to_flat(p)), None, lam, m, "two_layer_phase", False, width))
    return out


def lm_polish(loss: SampleK, w, data, iters: int = 100):
    """Levenberg-Marquardt on K_n (float64) from w: to a true parameter of the sample loss where the start is in
    its basin."""
    x, y = data

    def resid(v):
        return (mlp_forward(unflatten_mlp(v, loss.widths), x)[:, 0] - y) / np.sqrt(2 * len(y))

    @jax.jit
    def step(v, mu):
        r, J = resid(v), jax.jacfwd(resid)(v)
        dv = jnp.linalg.solve(J.T @ J + mu * jnp.eye(v.size), -J.T @ r)
        return v + dv, r @ r, jnp.sum(resid(v + dv) ** 2)

    mu = 1e-3
    for _ in range(iters):
        new, before, after = step(w, mu)
        if after < before:
            w, mu = new, max(mu / 3, 1e-15)
        else:
            mu *= 4
    return w


def mlp_case() -> Case:
    """Teacher-student: a ReLU MLP of widths (2, 3, 3, 1) (He initialisation, biases N(0, 0.3^2); every hidden
    node active on 20-80 % of the inputs) and a student of its size, started at the teacher with every parameter
    perturbed by N(0, 0.2^2) (from random initialisations 27 students of this architecture, on 7 teachers, stopped
    in spurious minima at K_n = 6e-6 .. 1e-2),
    trained by Adam (2,000 steps) on 1,024 noise-free teacher samples from [-1, 1]^2 and polished by
    Levenberg-Marquardt in float64 to K_n ~ 1e-30: a true parameter of the sample loss K_n."""
    widths = (2, 3, 3, 1)
    x = UniformBox(1.0, 2).sample(jax.random.PRNGKey(1), 1024, jnp.float64)
    teacher = init_mlp(jax.random.PRNGKey(14), widths, bias_std=0.3, dtype=jnp.float64)
    y = mlp_forward(teacher, x)[:, 0]
    loss = SampleK(widths)
    start = flatten_mlp(teacher) + 0.2 * jax.random.normal(jax.random.PRNGKey(4), (flatten_mlp(teacher).size,))
    trained = _adam(widths, unflatten_mlp(start, widths), x, y)
    w0 = np.asarray(lm_polish(loss, flatten_mlp(trained), (x, y), iters=80))
    if not float(loss(jnp.asarray(w0), (x, y))) < 1e-25:
        raise RuntimeError(f"the student did not reach the true set: K_n = {float(loss(jnp.asarray(w0), (x, y))):.1e}")
    return Case("ReLU MLP 2-3-3-1, trained student (teacher-student, sample K_n)", loss, w0, (x, y), None, None,
                "not known", False, sum(widths[1:-1]))


@partial(jax.jit, static_argnums=(0,))
def _adam(widths, params, x, y):
    import optax

    opt = optax.adam(3e-3)

    def step(carry, _):
        p, state = carry
        grad = jax.grad(lambda q: jnp.mean((mlp_forward(q, x)[:, 0] - y) ** 2))(p)
        updates, state = opt.update(grad, state, p)
        return (optax.apply_updates(p, updates), state), None

    return jax.lax.scan(step, (params, opt.init(params)), None, length=2000)[0][0]


def all_cases() -> list[Case]:
    return crossing_cases() + linear_cases() + two_layer_cases() + [mlp_case()]


# ----------------------------------------------------------------------------------------------------------------
# the analysis


@partial(jax.jit, static_argnums=(0,))
def _along(loss, data, w0, E, V, ts):
    """Along every row v of V and every t: K(w0 + t v), g(v, t) = min_z K(w0 + t v + E z) and the gradient of K at
    that minimiser (nv, nt), (nv, nt), (nv, nt, d).  g by Newton's method in z (the Hessian's eigenvalues in
    absolute value; a step size from STEP_SIZES that lowers K, else no step), from z = 0."""
    exact = lambda w: loss(w, loss.rule(w, data))
    r = E.shape[1]

    def gradient(w):
        rule = loss.rule(w, data)
        return jax.grad(lambda u: loss(u, rule))(w)

    def one(v, t):
        base = w0 + t * v
        line = exact(base)
        if r == 0:
            return line, line, gradient(base)

        def step(z, _):
            rule = loss.rule(base + E @ z, data)
            f = lambda u: loss(base + E @ u, rule)
            grad, H = jax.grad(f)(z), jax.hessian(f)(z)
            ev, Q = jnp.linalg.eigh(0.5 * (H + H.T))
            ev = jnp.maximum(jnp.abs(ev), 1e-12 * jnp.max(jnp.abs(ev)) + 1e-300)
            dz = -Q @ ((Q.T @ grad) / ev)
            tries = z[None] + jnp.asarray(STEP_SIZES)[:, None] * dz[None]
            vals = jax.vmap(lambda u: exact(base + E @ u))(tries)
            best = jnp.argmin(vals)
            return jnp.where(vals[best] < exact(base + E @ z), tries[best], z), None

        z = jax.lax.scan(step, jnp.zeros(r, w0.dtype), None, length=NEWTON_STEPS)[0]
        return line, exact(base + E @ z), gradient(base + E @ z)

    return jax.vmap(jax.vmap(one, (None, 0)), (0, None))(V, ts)


def along(case: Case, E, V, ts):
    """_along of a case as NumPy arrays."""
    out = _along(case.loss, case.data, jnp.asarray(case.w0, jnp.float64), jnp.asarray(E), jnp.asarray(V),
                 jnp.asarray(ts))
    return tuple(np.asarray(a) for a in out)


class Direction(NamedTuple):
    line_flat: bool              # K(w0 + t v) = 0 to rounding at T_LINE
    curve_flat: bool             # g(v, t) = 0 to rounding at T_CURVE
    line_order: float | None     # K(w0 + t v) ~ t^k: k (None where flat)
    curve_order: float | None    # g(v, t) ~ t^k: k (None where flat)


def _order(t, k, floor):
    """The log-log slope of k(t) over the t where k > floor (at least 3 of them; else None)."""
    k = np.asarray(k)
    keep = k > floor
    if keep.sum() < 3:
        return None
    return float(np.polyfit(np.log(t[keep]), np.log(k[keep]), 1)[0])


def classify(line, curve, scale) -> Direction:
    """line, curve: (len(TS),) K and g along one direction."""
    tol = FLAT_RTOL * scale * TS ** 2
    pick = lambda ts: np.isin(TS, ts)
    line_flat = bool(np.all(line[pick(T_LINE)] <= tol[pick(T_LINE)]))
    curve_flat = line_flat or bool(np.all(curve[pick(T_CURVE)] <= tol[pick(T_CURVE)]))
    s, floor = pick(T_SLOPE), SLOPE_FLOOR * scale
    return Direction(line_flat, curve_flat, None if line_flat else _order(TS[s], line[s], floor),
                     None if curve_flat else _order(TS[s], curve[s], floor))


class Result(NamedTuple):
    case: Case
    d: int
    r: int
    eigenvalues: np.ndarray      # (d,) of H, descending
    stiff: np.ndarray            # (r, d) H's eigenvectors of non-zero eigenvalues
    flat: np.ndarray             # (f, d) the null directions g does not depend on
    bent: np.ndarray             # (d - r - f, d) the others, C's eigenvectors, largest first
    spread: np.ndarray           # (2, d - r): the spread of G along C's eigenvectors at PROBE_T[0], its growth
    flat_dirs: list              # Direction per row of flat
    bent_dirs: list              # Direction per row of bent
    seconds: float


def analyse(case: Case, seed: int = 0) -> Result:
    """H, its rank and its null space N at w0; the null directions the splitting lemma's remainder g depends on;
    and a Direction (module docstring) for each of a basis of N that separates them.

    Which directions g depends on: G(v, t) = t grad_v log g(v, t) = t^2 N^T grad K(w*) / g(v, t) (the envelope
    theorem: grad_v g(v, t) = t N^T grad K(w*), w* g's minimiser) for random unit v in N at a pair of t of PROBE_T
    (4 times apart; the first where g > PROBE_FLOOR s at n + 2 of the v: below it the gradient is rounding).
    G is scale-free: along a direction g depends on it is O(1) and the same at both t (exactly where g is
    homogeneous), whatever the order and coefficient there; along a direction g depends on only through the
    curvature of a symmetry orbit (a scaling moves along a hyperbola, not along its tangent) it is O(t), so it
    grows with t; where g does not depend on a direction it is 0.  So, in the eigenbasis q_i of C = mean G G^T at
    the smaller t, a direction is flat where its spread sqrt(mean (q_i . G)^2) is below NEGLIGIBLE of the largest
    or grows by more than LEAK_RATIO from the smaller t to the larger; all of N is flat where g = 0 at every probe
    (K Morse-Bott)."""
    start = time.perf_counter()
    w0 = jnp.asarray(case.w0, jnp.float64)
    H = np.asarray(hessian(case.loss, w0, case.loss.rule(w0, case.data)))
    ev, vec = np.linalg.eigh(H)
    ev, vec = ev[::-1], vec[:, ::-1]
    d, r = H.shape[0], rank_of_symmetric(ev)
    E, N = vec[:, :r], vec[:, r:]
    scale = float(np.max(np.abs(ev))) or 1.0
    flat, bent, spread, flat_dirs, bent_dirs = np.zeros((0, d)), np.zeros((0, d)), np.zeros(0), [], []
    if d > r:
        n = d - r
        coords = np.random.default_rng(seed).standard_normal((2 * n + 4, n))
        coords /= np.linalg.norm(coords, axis=1, keepdims=True)
        _, g, grads = along(case, E, coords @ N.T, TS)
        G = grads @ N * TS[None, :, None] / np.where(g > 0, g, 1.0)[..., None]   # (samples, len(TS), n)
        spread, growth, Q, is_flat = np.zeros(n), np.zeros(n), np.eye(n), np.ones(n, bool)
        for i, pair in enumerate(PROBE_T):         # the first pair of t where g is above rounding at enough v
            small, large = (int(np.flatnonzero(TS == t)[0]) for t in pair)
            keep = (g[:, small] > PROBE_FLOOR * scale) & (g[:, large] > PROBE_FLOOR * scale)
            if keep.sum() < n + 2 and i == len(PROBE_T) - 1:
                keep = (g[:, small] > SLOPE_FLOOR * scale) & (g[:, large] > SLOPE_FLOOR * scale)
            if keep.sum() >= n + 2:
                mu, Q = np.linalg.eigh(G[keep, small].T @ G[keep, small] / keep.sum())
                Q = Q[:, ::-1]
                spread = np.sqrt(np.mean((G[keep, small] @ Q) ** 2, axis=0))
                growth = np.sqrt(np.mean((G[keep, large] @ Q) ** 2, axis=0)) / np.maximum(spread, 1e-300)
                is_flat = (spread <= NEGLIGIBLE * spread[0]) | (growth > LEAK_RATIO)
                break
        bent, flat = (N @ Q[:, ~is_flat]).T, (N @ Q[:, is_flat]).T
        spread = np.stack([spread, growth])
        basis = np.vstack([bent, flat, np.zeros((n + 4, d))])       # padded to the probes' shape: one compilation
        line, curve, _ = along(case, E, basis, TS)
        found = [classify(line[i], curve[i], scale) for i in range(n)]
        bent_dirs, flat_dirs = found[:len(bent)], found[len(bent):]
        # a flat direction as estimated is off the flat subspace by about the leakage (~1e-5 where g has order 3),
        # which leaves g ~ (1e-5 t)^3 > rounding along it: it counts as flat on W0 where g is below rounding or
        # below LEAK_GAIN of K on the line there (a not-flat direction has g ~ K on the line)
        pick = np.isin(TS, T_CURVE)
        flat_dirs = [x if x.curve_flat else x._replace(
            curve_flat=bool(np.all(curve[i, pick] <= LEAK_GAIN * line[i, pick])))
            for i, x in enumerate(flat_dirs, start=len(bent))]
    return Result(case, d, r, ev, E.T, flat, bent, spread, flat_dirs, bent_dirs, time.perf_counter() - start)


# ----------------------------------------------------------------------------------------------------------------
# the table


def fraction_text(x) -> str:
    if x is None:
        return "?"
    x = Fraction(x)
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def orders_text(orders) -> str:
    """Orders as "4 (x3), 6": rounded to an integer within 0.05, else two decimals; "0" for flat, "?" unread."""
    if not orders:
        return "-"
    counts: dict[str, int] = {}
    for o in orders:
        key = o if isinstance(o, str) else "?" if o is None else (
            f"{round(o):d}" if abs(o - round(o)) < 0.05 else f"{o:.2f}")
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k} (x{n})" if n > 1 else k for k, n in sorted(counts.items()))


def row(res: Result) -> str:
    c, d, r = res.case, res.d, res.r
    two_lam = None if c.lam is None else 2 * c.lam
    flat_line = sum(x.line_flat for x in res.flat_dirs)
    flat_orders = orders_text([x.line_order for x in res.flat_dirs if not x.line_flat])
    bent_orders = orders_text(["0" if x.curve_flat else x.curve_order for x in res.bent_dirs])
    odd = sum(not x.curve_flat for x in res.flat_dirs)          # a "flat" direction whose g is not 0: a warning
    flat_text = f"{len(res.flat_dirs)}" + (f" ({odd} with g > 0!)" if odd else "")
    name = c.name.replace(" | ", "; ") + (f" ({c.hidden} hidden nodes)" if c.hidden and c.lam is None else "")
    return (f"| {name} | {d} | {r} | {fraction_text(two_lam)} | {c.m if c.m is not None else '?'} | {d - r} | "
            f"{flat_text} | {flat_line} | {flat_orders} | {len(res.bent_dirs)} | {bent_orders} |")


HEADER = ("| case | d | r | 2λ | m | d − r | flat: g does not depend on them | of which flat on the line | "
          "the other flat ones: order of K on the line | not flat | their order of g |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|")


def checks(results) -> list[str]:
    """The inequalities, case by case: r <= 2 lambda <= d, and where K is analytic 2 lambda <= (d + r) / 2."""
    lines = []
    for res in results:
        c = res.case
        if c.lam is None:
            continue
        two = 2 * c.lam
        ok = res.r <= two <= res.d
        analytic = (not c.analytic) or two <= Fraction(res.d + res.r, 2)
        if not (ok and analytic):
            lines.append(f"VIOLATED: {c.name}: r = {res.r}, 2 lambda = {two}, d = {res.d}, "
                         f"not flat {len(res.bent_dirs)}")
    return lines


# ----------------------------------------------------------------------------------------------------------------
# the figure


FIGURE_CASES = ("normal crossing w1^2 + w2^4", "reduced rank 3-2-3, rank 1, deepest point",
                "two-layer ReLU, width 2, phase '++' of relu(x) (DSLT3 Ex. 3.4's truth)")


def figure(results, path):
    """K along a stiff eigenvector of H, along a not-flat null direction (K on the line and g) and along a flat
    null direction (K on the line; g = 0 there), log-log, a panel per case of FIGURE_CASES."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_name = {res.case.name: res for res in results}
    picked = [by_name[name] for name in FIGURE_CASES if name in by_name]
    t = np.geomspace(1e-3, 0.3, 25)
    fig, axes = plt.subplots(1, len(picked), figsize=(4.3 * len(picked), 4.0), squeeze=False)
    for ax, res in zip(axes[0], picked):
        c = res.case
        rows = [res.stiff[-1]] + ([res.bent[0]] if len(res.bent) else []) + \
            ([res.flat[0]] if len(res.flat) else [])
        line, curve, _ = along(c, res.stiff.T, np.vstack(rows), t)
        drawn = [line[0]]
        ax.loglog(t, line[0], "C0-", lw=2, label="K along a stiff eigenvector of H")
        k = 1
        if len(res.bent):
            ax.loglog(t, line[k], "C3-", lw=3, label="K along a null direction g depends on")
            ax.loglog(t, curve[k], "C1--", lw=1.5, label="g there (the stiff directions minimised out)")
            drawn += [line[k], curve[k]]
            k += 1
        if len(res.flat):
            ax.loglog(t, line[k], "C2-", lw=2, label="K along a null direction g does not depend on (g = 0)")
            drawn.append(line[k])
        drawn = np.concatenate(drawn)
        top, bottom = float(np.max(drawn)), float(np.min(drawn[drawn > 0]))
        for power, style in [(2, ":"), (3, "-."), (4, "--")]:
            ax.loglog(t, 0.1 * top * (t / t[-1]) ** power, color="0.45", ls=style, lw=1,
                      label=f"slope {power} (reference)")
        ax.set_ylim(bottom / 10, top * 10)
        title = c.name.replace("normal crossing ", "K = ").replace("two-layer ReLU, ", "ReLU ")
        ax.set_title(f"{title}\nd = {res.d}, r = {res.r}, 2λ = {fraction_text(2 * c.lam)}", fontsize=8)
        ax.set_xlabel("t = distance from the true parameter w0")
    axes[0][0].set_ylabel("loss along w0 + t v")
    handles = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.13, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--figure", help="write the figure (K along stiff and null directions) to this PNG")
    parser.add_argument("--only", help="only the cases whose name contains this")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    cases = all_cases()
    if args.only:
        cases = [c for c in cases if args.only in c.name]
    results = []
    print(HEADER)
    for case in cases:
        res = analyse(case)
        results.append(res)
        print(row(res), flush=True)
    print()
    bad = checks(results)
    print("\n".join(bad) if bad else "every case with a known lambda: r <= 2 lambda <= d, and where K is analytic "
          "2 lambda <= (d + r) / 2")
    for res in results:
        if res.case.hidden and res.case.lam is None:
            from slt_relu.models import mlp as mlp_model

            widths = res.case.loss.widths
            G = np.asarray(mlp_model(widths, jnp.float64).scaling_generators(unflatten_mlp(jnp.asarray(res.case.w0),
                                                                                         widths)))
            outside = np.linalg.norm(G @ res.stiff.T) / np.linalg.norm(G)
            print(f"{res.case.name}: K_n(w0) = {float(res.case.loss(jnp.asarray(res.case.w0), res.case.data)):.1e}; "
                  f"d - r = {res.d - res.r} = its hidden nodes ({res.case.hidden}): the null space is spanned by "
                  f"the {np.linalg.matrix_rank(G)} scaling generators (their part outside it: {outside:.1e} "
                  f"relative)")
    if os.environ.get("HESSIAN_LAMBDA_DEBUG"):
        for res in results:
            print(res.case.name, f"{res.seconds:.1f} s", "spread", np.array2string(
                res.spread, formatter={"float_kind": lambda x: f"{x:.1e}"}))
    if args.figure:
        figure(results, args.figure)
        print(f"figure: {args.figure}")
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
