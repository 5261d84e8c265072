"""Where two phases of the toy model of superposition exchange the posterior's lead: measured from SMC's
masses along n, and predicted by the asymptotic formula.

The crossover.  Along a log-spaced list of n, the phases a (the lower loss, e.g. the 6-gon) and b (the
5-gon) exchange the lead where r(n) = log(M_a(n) / M_b(n)) changes sign, M the mean over data sets of the
data sets' pooled masses; :func:`crossover_from_masses` interpolates r linearly in log n between the
bracketing points, and its standard error is a two-stage bootstrap (data sets resampled with replacement,
then each chosen data set's runs resampled with replacement and re-pooled by their evidence), beside the
data-sets-only and runs-only bootstraps.  The data sets are nested along n (data set d at n is the first n
inputs of one sequence), as a growing data set would be, so the n-dependence of each data set is smooth and
the bootstrap resamples whole sequences.

The asymptotic formula.  F_alpha(n) ~ n beta L_alpha + lambda_alpha log(n beta) (Watanabe 2009; the form
Chen et al. 2023 use), so a (lower loss L_a, larger lambda_a) takes the lead from b at the larger root of

    n beta (L_b - L_a) = (lambda_a - lambda_b) log(n beta),
    n beta = -W_(-1)(-q) / q,   q = (L_b - L_a) / (lambda_a - lambda_b),

W_(-1) the lower branch of Lambert's W (:func:`formula_crossover`); for a group of variants
(:func:`formula_group_crossover`) F_b = -log sum_v exp(-F_v).  Among all the k-gon minima with a first-principles
lambda (:func:`kgon_minima`), the phase of least F_a(n) at beta = 1 (:func:`bayes_preferred`) changes along n
(:func:`bayes_sequence`): the phases a Bayesian posterior prefers as the data grow.

References:
    Chen, Lau, Mendel, Wei, Murfet 2023, "Dynamical versus Bayesian phase transitions in a toy model of
    superposition", arXiv 2310.06301 (the k-gon phases, their local free energies, the transitions);
    Del Moral, Doucet & Jasra 2006 (tempered SMC); Watanabe 2009 (the free energy's asymptotics).
"""
from __future__ import annotations

import copy
import math
from functools import lru_cache
from typing import NamedTuple, Sequence

import numpy as np

from ..network import check_count
from .critical_points import kgon_record, kgon_table
from ..models.tms import check_positive
from .phases import label_name

__all__ = ["Crossover", "bayes_preferred", "bayes_sequence", "crossover_from_masses", "formula_crossover",
           "formula_group_crossover", "formula_predictions", "evidence_weights", "k_of", "kgon_minima", "pair_formula",
           "transition_crossover"]


def evidence_weights(log_evidence) -> np.ndarray:
    """(..., R) evidence weights of the runs of each data set, softmax over the last axis."""
    lz = np.asarray(log_evidence, np.float64)
    w = np.exp(lz - lz.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True)


class Crossover(NamedTuple):
    """Where phase a takes the lead from phase b along n (module docstring).

    Attributes:
        n: the crossover, log(M_a / M_b) interpolated linearly in log n between the bracketing points (NaN
            where it does not change sign from < 0 to >= 0).
        se: its standard error, the two-stage bootstrap (data sets, then runs within them); the standard
            deviation of the replicates' n that have a crossover (NaN where n is).
        se_datasets: the bootstrap over data sets alone (each data set's pooled masses as measured).
        se_runs: the bootstrap over runs alone (the data sets fixed): the Monte Carlo part.
        found: the fraction of two-stage replicates with a crossover (se counts those only).
        bracket: (n_lo, n_hi) the bracketing points (NaN if none).
        log_ratio: (len(ns),) log(M_a / M_b) at each n (masses floored at ``floor``; NaN where both are below
            ``min_mass``).
    """

    n: float
    se: float
    se_datasets: float
    se_runs: float
    found: float
    bracket: tuple
    log_ratio: np.ndarray


def _first_crossing(log_n, r):
    """Linear interpolation in log n of the first sign change of r from < 0 to >= 0 between neighbours where r
    is defined (not NaN), along the last axis: (crossing log n or NaN, bracket index or -1), vectorised over
    leading axes."""
    r = np.asarray(r, np.float64)
    up = (r[..., :-1] < 0) & (r[..., 1:] >= 0)
    has = up.any(-1)
    i = np.argmax(up, -1)
    r0 = np.take_along_axis(r, i[..., None], -1)[..., 0]
    r1 = np.take_along_axis(r, i[..., None] + 1, -1)[..., 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        x = log_n[i] + (log_n[i + 1] - log_n[i]) * (-r0) / (r1 - r0)
    return np.where(has, x, np.nan), np.where(has, i, -1)


def _pooled_log_ratio(run_a, run_b, log_evidence, floor, min_mass=0.0):
    """log(M_a / M_b) (..., n) from per-run masses (..., n, K, R) and log Z (..., n, K, R); NaN where both
    M_a and M_b are below min_mass."""
    w = evidence_weights(log_evidence)
    Ma = np.maximum(np.mean(np.sum(w * run_a, -1), -1), floor)
    Mb = np.maximum(np.mean(np.sum(w * run_b, -1), -1), floor)
    return np.where(np.maximum(Ma, Mb) >= min_mass, np.log(Ma) - np.log(Mb), np.nan)


def crossover_from_masses(ns, run_a, run_b, log_evidence, *, n_boot: int = 2000, seed: int = 0,
                          floor: float | None = None, min_mass: float = 0.01) -> Crossover:
    """The n where phase a takes the lead from phase b, from the runs' masses at each n.

        M_x(n) = (1/K) sum_k sum_r w_(k, r)(n) m_(x, k, r)(n),   w = the runs' evidence weights on data set k,
        r(n) = log M_a(n) - log M_b(n),
        log n* = log n_i + (log n_(i+1) - log n_i) (-r_i) / (r_(i+1) - r_i)   at the first i with r_i < 0 <= r_(i+1),

    among the n where M_a or M_b is at least ``min_mass`` (where both are smaller, r is the noise of a few
    particles: at n = 83, c = 6, the 6-gon and the 5-gon "+" hold 0.001 each).

    Standard errors by bootstrap (``n_boot`` replicates each): two-stage (the K data sets resampled with
    replacement as whole sequences along n, then each chosen data set's R runs resampled with replacement at
    each n, and the evidence weights recomputed); over data sets alone; over runs alone.  The two-stage
    bootstrap counts the runs' variance once more than it is in the data sets' spread (conservative).

    Args:
        ns: (B,) increasing sample sizes.
        run_a, run_b: (B, K, R) each run's fraction of particles in phase a and b.
        log_evidence: (B, K, R) each run's log Z.
        n_boot: bootstrap replicates (>= 2).
        seed: the bootstrap's NumPy seed (the same seed, the same numbers).
        floor: masses below it count as it (default 0.5 / (K R N_eff) with N_eff = 1e4: below any mass
            a run of 10,000 particles resolves), so that a phase without particles keeps r finite.
        min_mass: r is undefined (NaN in ``log_ratio``, no bracket) at the n where both masses are below it
            (default 0.01; >= 0).

    Returns:
        :class:`Crossover` (n, se, se_datasets, se_runs, found, bracket, log_ratio).
    """
    ns = np.asarray(ns, np.float64)
    if ns.ndim != 1 or len(ns) < 2 or not np.all(ns > 0) or not np.all(np.diff(ns) > 0):
        raise ValueError(f"ns: expected at least 2 increasing positive sample sizes, got {ns.tolist()}")
    run_a, run_b, lz = (np.asarray(a, np.float64) for a in (run_a, run_b, log_evidence))
    if run_a.ndim != 3 or run_a.shape[0] != len(ns):
        raise ValueError(f"run_a: expected shape ({len(ns)}, datasets, runs), got {run_a.shape}")
    for name, a in (("run_b", run_b), ("log_evidence", lz)):
        if a.shape != run_a.shape:
            raise ValueError(f"{name}: expected shape {run_a.shape} like run_a, got {a.shape}")
    n_boot = check_count(n_boot, "n_boot", 2)
    B, K, R = run_a.shape
    floor = 0.5 / (K * R * 1e4) if floor is None else check_positive(floor, "floor")
    if isinstance(min_mass, bool) or not isinstance(min_mass, (int, float)) or not 0 <= min_mass < 1:
        raise ValueError(f"min_mass: expected a number in [0, 1), got {min_mass!r}")
    log_n = np.log(ns)
    r = _pooled_log_ratio(run_a, run_b, lz, floor, min_mass)
    x, i = _first_crossing(log_n, r)
    rng = np.random.default_rng(seed)
    bi = np.arange(B)[None, :, None, None]

    def replicate(resample_datasets, resample_runs):
        kk = rng.integers(0, K, (n_boot, 1, K, 1)) if resample_datasets else np.arange(K)[None, None, :, None]
        rr = rng.integers(0, R, (n_boot, B, K, R)) if resample_runs else np.arange(R)[None, None, None, :]
        kk, rr = np.broadcast_arrays(kk, rr, np.zeros((n_boot, B, K, R), int))[:2]
        sel = lambda a: a[bi, kk, rr]
        xb, _ = _first_crossing(log_n, _pooled_log_ratio(sel(run_a), sel(run_b), sel(lz), floor, min_mass))
        ok = np.isfinite(xb)
        sd = float(np.std(np.exp(xb[ok]), ddof=1)) if ok.sum() > 1 else float("nan")
        return sd, float(ok.mean())

    se, found = replicate(True, True)
    se_d, _ = replicate(True, False)
    se_r, _ = replicate(False, True)
    if i < 0:                                            # no point estimate: no error bar either
        se = se_d = se_r = float("nan")
    bracket = (float(ns[i]), float(ns[i + 1])) if i >= 0 else (float("nan"), float("nan"))
    return Crossover(float(np.exp(x)), se, se_d, se_r, found, bracket, r)


def _members(ds, name: str):
    """(variable, indices) of a phase name: a group ("5-gon") or a variant ("5-gon -")."""
    if name in list(ds["phase"].values):
        return "run_phase_mass", "phase", name
    if name in list(ds["variant"].values):
        return "run_mass", "variant", name
    raise ValueError(f"phase: expected a phase or variant of the Dataset ({', '.join(map(str, ds['phase'].values))}; "
                     f"{', '.join(map(str, ds['variant'].values))}), got {name!r}")


def transition_crossover(ds, a: str = "6-gon", b: str = "5-gon", *, n_boot: int = 2000, seed: int = 0) -> Crossover:
    """:func:`crossover_from_masses` of two phases (groups such as "6-gon" or variants such as "5-gon -")
    from a Dataset of :func:`~slt_relu.tms.transition.bayesian_transition` (variables ``run_mass`` /
    ``run_phase_mass`` (n, dataset, run, ...) and ``log_evidence`` (n, dataset, run)); the floor is half a
    particle of all runs at an n."""
    va, da, na = _members(ds, a)
    vb, db, nb = _members(ds, b)
    N = int(ds.attrs.get("num_particles", 1e4))
    K, R = ds.sizes["dataset"], ds.sizes["run"]
    return crossover_from_masses(ds["n"].values, ds[va].sel({da: na}).transpose("n", "dataset", "run").values,
                                 ds[vb].sel({db: nb}).transpose("n", "dataset", "run").values,
                                 ds["log_evidence"].transpose("n", "dataset", "run").values,
                                 n_boot=n_boot, seed=seed, floor=0.5 / (K * R * N))


# ----------------------------------------------------------------------------------------
# the asymptotic formula


def formula_crossover(loss_a: float, lambda_a: float, loss_b: float, lambda_b: float, beta: float = 1.0) -> float:
    """The n where F_a(n) = n beta L_a + lambda_a log(n beta) falls below F_b(n) for good (the larger root):

        n beta (L_b - L_a) = (lambda_a - lambda_b) log(n beta),   n beta = -W_(-1)(-q) / q,
        q = (L_b - L_a) / (lambda_a - lambda_b),

    W_(-1) the lower real branch of Lambert's W.  NaN where there is no such n > 1/beta: a leads at every n
    (L_a < L_b with lambda_a <= lambda_b, or q > 1/e), or never (L_a >= L_b).

    Args:
        loss_a, lambda_a: phase a's loss and learning coefficient (the lower loss).
        loss_b, lambda_b: phase b's.
        beta: the inverse temperature (> 0).

    Returns:
        n as a float.
    """
    from scipy.special import lambertw

    for v, nm in ((loss_a, "loss_a"), (lambda_a, "lambda_a"), (loss_b, "loss_b"), (lambda_b, "lambda_b")):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
            raise ValueError(f"{nm}: expected a finite number, got {v!r}")
    beta = check_positive(beta, "beta")
    dL, dlam = loss_b - loss_a, lambda_a - lambda_b
    if dL <= 0 or dlam <= 0:
        return float("nan")
    q = dL / dlam
    if q >= 1 / math.e:
        return float("nan")
    return float(-lambertw(-q, -1).real / q) / beta


def formula_group_crossover(loss_a: float, lambda_a: float, losses_b: Sequence[float], lambdas_b: Sequence[float],
                            beta: float = 1.0, n_max: float = 1e12) -> float:
    """The largest n where F_a(n) = n beta L_a + lambda_a log(n beta) crosses the group's free energy

        F_b(n) = -log sum_v exp(-(n beta L_v + lambda_v log(n beta)))   (its variants v, equal prefactors),

    found by bisection in log n on the largest interval [n_1, n_max] where F_b - F_a changes sign (n_1 > 1 /
    beta); NaN if it has none (a leads at every n there, or at none).

    Args:
        loss_a, lambda_a: phase a's loss and learning coefficient.
        losses_b, lambdas_b: the group's variants'.
        beta: the inverse temperature (> 0).
        n_max: the largest n searched.

    Returns:
        n as a float.
    """
    from scipy.optimize import brentq
    from scipy.special import logsumexp

    beta = check_positive(beta, "beta")
    Lb, lb = np.asarray(losses_b, np.float64), np.asarray(lambdas_b, np.float64)
    if Lb.ndim != 1 or Lb.shape != lb.shape or not len(Lb) or not np.all(np.isfinite(Lb) & np.isfinite(lb)):
        raise ValueError(f"losses_b: expected finite losses matching lambdas_b, got {Lb.tolist()} and {lb.tolist()}")

    def gap(u):                                                 # F_b - F_a at n beta = exp(u)
        return -logsumexp(-(math.exp(u) * Lb + lb * u)) - (math.exp(u) * loss_a + lambda_a * u)

    grid = np.linspace(1e-9, math.log(n_max * beta), 4000)
    g = np.array([gap(u) for u in grid])
    up = np.flatnonzero((g[:-1] < 0) & (g[1:] >= 0))
    if not len(up):
        return float("nan")
    i = up[-1]
    return float(math.exp(brentq(gap, grid[i], grid[i + 1], xtol=1e-12)) / beta)


def formula_predictions(num_features: int = 6, k_a: int | None = None, k_b: int | None = None,
                        beta: float = 1.0) -> dict:
    """The asymptotic formula's crossovers of the k_a-gon (default c) against each variant of the k_b-gon
    (default c - 1) and against the k_b-gon group, from ``kgon_table``'s exact losses and first-principles
    lambdas (k_a = c has no variant).

    Args:
        num_features: c.
        k_a, k_b: the two k (k_a > k_b).
        beta: the inverse temperature.

    Returns:
        A dict with the keys ``a`` (the phase's name), ``loss_a``, ``lambda_a``, ``variants`` (per variant
        name a dict of ``loss``, ``lambda``, ``n_formula``), ``group`` (n_formula of the group,
        :func:`formula_group_crossover`) and ``dominant`` (the variant whose free energy is lowest at the
        group's n_formula); a variant without a first-principles lambda is left out.
    """
    c = check_count(num_features, "num_features", 2)
    k_a = c if k_a is None else check_count(k_a, "k_a")
    k_b = c - 1 if k_b is None else check_count(k_b, "k_b")
    if not k_b < k_a <= c:
        raise ValueError(f"k_b: expected k_b < k_a <= c = {c}, got k_a = {k_a}, k_b = {k_b}")
    return copy.deepcopy(_predictions(c, k_a, k_b, check_positive(beta, "beta")))


@lru_cache(maxsize=64)
def _predictions(c: int, k_a: int, k_b: int, beta: float) -> dict:
    """:func:`formula_predictions` of checked arguments, cached (the k-gon table of c takes seconds)."""
    rows = [kgon_record(c, k, npos) for k in (k_a, k_b) for npos in range(c - k + 1)]       # kgon_table's rows
    top = [r for r in rows if r.k == k_a and r.lambda_ is not None]
    if not top:
        raise ValueError(f"k_a: no first-principles lambda for the {k_a}-gon of c = {c}")
    a = min(top, key=lambda r: r.loss)
    variants = {}
    for r in rows:
        if r.k == k_b and r.lambda_ is not None:
            variants[label_name(k_b, r.n_positive, c)] = {
                "loss": r.loss, "lambda": r.lambda_,
                "n_formula": formula_crossover(a.loss, a.lambda_, r.loss, r.lambda_, beta)}
    group = formula_group_crossover(a.loss, a.lambda_, [v["loss"] for v in variants.values()],
                                    [v["lambda"] for v in variants.values()], beta)
    dominant = None
    if math.isfinite(group):
        t = group * beta
        dominant = min(variants, key=lambda v: t * variants[v]["loss"] + variants[v]["lambda"] * math.log(t))
    return {"a": label_name(k_a, a.n_positive, c), "loss_a": a.loss, "lambda_a": a.lambda_, "variants": variants,
            "group": group, "dominant": dominant}


def k_of(name: str) -> int | None:
    """k of a phase name ("5-gon", "5-gon -"), None for "none"."""
    head = str(name).split(" ")[0]
    return int(head[:-4]) if head.endswith("-gon") and head[:-4].isdigit() else None


def pair_formula(num_features: int, a: str, b: str, beta: float = 1.0) -> tuple[float, str | None]:
    """The asymptotic formula's n where phase a takes the lead from phase b, for phase names of
    ``slt_relu.tms.phases.phase_names`` (a group "5-gon" or a variant "5-gon -"), from
    :func:`formula_predictions` with k_a, k_b read off the names: a stands for its k-gon's lowest-loss variant
    with a first-principles lambda (the c-gon has one variant; a variant a other than that one: NaN); b is
    a variant (:func:`formula_crossover`) or the group of its variants with a lambda
    (:func:`formula_group_crossover`).

    Returns:
        (n or NaN, the variant of b whose free energy is lowest at the group's n (None for a variant b or
        without a crossover)).
    """
    c = check_count(num_features, "num_features", 2)
    k_a, k_b = k_of(a), k_of(b)
    try:
        pred = _predictions(c, k_a, k_b, check_positive(beta, "beta")) if None not in (k_a, k_b) and k_b < k_a <= c \
            else None
    except ValueError:                                  # no first-principles lambda for the k_a-gon
        pred = None
    if pred is None or a not in (pred["a"], f"{k_a}-gon"):
        return float("nan"), None
    if b in pred["variants"]:
        return pred["variants"][b]["n_formula"], None
    if b == f"{k_b}-gon":
        return pred["group"], pred["dominant"]
    return float("nan"), None


def kgon_minima(num_features: int) -> dict:
    """The k-gon minima of c features that have a first-principles lambda, with their exact losses.

    Args:
        num_features: c >= 1.

    Returns:
        ``{phase name: (exact loss L, lambda)}`` (the names ``slt_relu.tms.phases.label_name`` gives, from
        ``kgon_table``).
    """
    c = check_count(num_features, "num_features")
    return {label_name(r.k, r.n_positive, c): (float(r.loss), float(r.lambda_)) for r in kgon_table([c])
            if r.kind == "minimum" and r.lambda_ is not None}


def bayes_preferred(minima: dict, n: float) -> str:
    """The phase of least asymptotic free energy F_a(n) = n L_a + lambda_a log n (beta = 1).

    Args:
        minima: {name: (L, lambda)}, e.g. :func:`kgon_minima`.
        n: the sample size, > 0.

    Returns:
        The name of the phase.
    """
    if not minima:
        raise ValueError(f"minima: expected at least one phase {{name: (L, lambda)}}, got {minima!r}")
    n = check_positive(n, "n")
    return min(minima, key=lambda a: n * minima[a][0] + minima[a][1] * math.log(n))


def bayes_sequence(minima: dict, n_max: float, points: int = 2000) -> list[dict]:
    """The phases of least asymptotic free energy (:func:`bayes_preferred`) as n grows from 2 to n_max.

    Args:
        minima: {name: (L, lambda)}.
        n_max: the largest n, > 2.
        points: the log grid's points from 2 to n_max.

    Returns:
        [{"phase", "from_n"}] in order, from_n the first n of the grid where the phase leads.
    """
    if check_positive(n_max, "n_max") <= 2:
        raise ValueError(f"n_max: expected a number above 2, got {n_max!r}")
    out = []
    for n in np.geomspace(2, n_max, check_count(points, "points", 2)):
        p = bayes_preferred(minima, float(n))
        if not out or out[-1]["phase"] != p:
            out.append({"phase": p, "from_n": float(n)})
    return out

