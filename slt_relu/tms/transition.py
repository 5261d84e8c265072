"""The Bayesian phase transition of the toy model of superposition, measured by tempered SMC.

The tempered posterior of the TMS (``slt_relu.tms.model``) on flat parameters w = (W, b), D = 3 c,

    p_n(w) proportional to phi(w) exp(-n beta L_n(w)),   phi = N(0, s^2 I_D),   beta = 1 by default,
    L_n(w) = (1/n) sum_k ||x_k - ReLU(W^T W x_k + b)||^2,   x_k = mu_k e_(i_k),

puts its mass near the k-gon critical points (``slt_relu.tms.kgon``).  The phase of a draw is its k-gon
label (``slt_relu.tms.phases.label``; "none" where the long columns are no regular convex polygon), per
variant (the signs of the unused features' biases, e.g. "5-gon -") and grouped by k ("5-gon"), after
counting a column whose own output never fires (|W_i|^2 + b_i <= 0) as unused whatever its length
(:func:`phase_codes`: the "-" variants' flat valley lets such columns grow under the prior).  The
posterior mass of a phase alpha (a region U_alpha) and its local free energy (docs/design.md)

    mass_alpha = int_(U_alpha) p_n,    F_alpha = -log int_(U_alpha) phi exp(-n beta L_n) = -log Z - log mass_alpha,

are measured by adaptive tempered SMC from the prior (``slt_relu.sampling.smc``): the particles are
moved by HMC while the bridge phi exp(-lambda n beta L_n) is tempered from lambda = 0, and each particle's
importance weight exp(-(lambda' - lambda) n beta L_n) carries the modes' relative evidence from the
temperature where they separate to n beta, so the masses of k-gon basins that HMC cannot connect are
weighted by evidence, not by where particles happened to fall.  Each data set has R independent runs,
pooled by their evidence (``slt_relu.posterior.masses.run_weights``, the island estimator: w_r =
Z_r / sum Z_r'), with Monte Carlo errors from the runs' spread (the delta method,
``slt_relu.posterior.masses.runs_mcse``); the spread over K data sets is the data's own variability.

The prior.  N(0, s^2) per coordinate with s = 1 by default: the refined k-gons have columns of length
1 (k <= 4) to 1.32 (k = 6) and biases from -0.62 (the 6-gon's) to 1/12 (a positive unused one), every
coordinate within 1.4 s of the origin, so the prior density is smooth and of order one at every k-gon
(none is cut off or favoured by orders of magnitude: -log phi differs by 2.75 nats between the 6-gon and
the 5-gon); the asymptotics (n L + lambda log n) do not depend on s, which enters each phase's free
energy at order one (-log phi(w_alpha) and the prior mass of its flat directions).  A broader s
lengthens the bridge from the prior and puts more of the low-n mass in the "none" phase.

The empirical loss from sorted inputs.  With one active feature per input, L_n only needs, per
feature i, its magnitudes mu sorted, and the prefix sums S_p of mu^p (p = 0, 1, 2): output j on the
inputs of feature i is ReLU(mu G_ji + b_j), active on the mu beyond the kink -b_j / G_ji (below it
for G_ji < 0; all or none for G_ji = 0), a contiguous run of the sorted mu found by binary search, so

    n L_n = sum_i sum_j [ t^2 S_2(all) + ((t - a)^2 - t^2) S_2(A) - 2 (t - a) b S_1(A) + b^2 S_0(A) ],
    a = G_ji,  b = b_j,  t = delta_ij,  A = the active run of feature i's magnitudes,

exactly (to rounding), in O(c^2 log n) per evaluation instead of O(n c^2): at n = 5000 a gradient
costs about 13 us instead of about 740 us (vmapped over 256 parameters on a 2-core CPU shared with other
work; :func:`sorted_empirical_loss`; tests/test_tms_transition.py checks it against
``slt_relu.tms.model.empirical_loss``).  The run indices are integers, so the
gradient is that of the piece selected at w, which is the gradient of L_n wherever no kink falls on a
data point (everywhere but a null set; the integrand is continuous at the kink).

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
(:func:`formula_group_crossover`) F_b = -log sum_v exp(-F_v).

References:
    Chen, Lau, Mendel, Wei, Murfet 2023, "Dynamical versus Bayesian phase transitions in a toy model of
    superposition", arXiv 2310.06301 (the k-gon phases, their local free energies, the transitions);
    Del Moral, Doucet & Jasra 2006 (tempered SMC); Watanabe 2009 (the free energy's asymptotics).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..network import check_count
from .kgon import kgon_table
from .model import R_HIDDEN, TMSParams, sample_inputs
from .phases import label, label_name

__all__ = ["Crossover", "SortedInputs", "add_crossovers", "bayesian_transition", "crossover_from_masses",
           "default_settings", "formula_crossover", "formula_group_crossover", "formula_predictions", "phase_codes",
           "phase_names", "posterior_phase_masses", "relabel", "sorted_empirical_loss", "sorted_inputs",
           "transition_crossover"]


# ----------------------------------------------------------------------------------------
# the empirical loss from sorted inputs


class SortedInputs(NamedTuple):
    """A TMS data set as its magnitudes sorted per feature (module docstring), a pytree.

    Attributes:
        mu: (c, n) feature i's magnitudes in increasing order in row i, padded with +inf.
        prefix: (c, n + 1, 3) prefix sums of mu^0, mu^1, mu^2 along each row (constant past the count).
        count: (c,) the inputs of each feature (int).
    """

    mu: jax.Array
    prefix: jax.Array
    count: jax.Array


def sorted_inputs(x, size: int | None = None) -> SortedInputs:
    """The :class:`SortedInputs` of inputs x (n, c) with at most one nonzero entry per row (x = mu e_i).

    Args:
        x: (n, c) inputs (``slt_relu.tms.sample_inputs``).
        size: the rows' length, >= n (default n): padding to a common size lets data sets of different n
            share one compiled program (the padding is +inf in mu and constant prefix sums: no effect).

    Returns:
        SortedInputs(mu (c, size), prefix (c, size + 1, 3), count (c,)) in x's floating dtype.

    Raises:
        ValueError: x not 2-D, non-finite, or a row with two nonzero entries.
    """
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"x: expected inputs of shape (n, c), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("x: expected finite inputs")
    if np.any(np.sum(x != 0, axis=1) > 1):
        raise ValueError("x: expected at most one nonzero entry per row (inputs x = mu e_i)")
    n, c = x.shape
    size = n if size is None else check_count(size, "size")
    if size < n:
        raise ValueError(f"size: expected at least the {n} inputs, got {size}")
    dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64
    feat = np.argmax(np.abs(x), axis=1)               # a zero row: any feature (mu = 0 is the same input for all)
    mu = x[np.arange(n), feat].astype(np.float64)
    srt = np.full((c, size), np.inf)
    prefix = np.zeros((c, size + 1, 3))
    count = np.zeros(c, np.int32)
    for i in range(c):
        m = np.sort(mu[feat == i])
        k = len(m)
        count[i], srt[i, :k] = k, m
        for p in range(3):
            cs = np.concatenate([[0.0], np.cumsum(m ** p)])
            prefix[i, : k + 1, p] = cs
            prefix[i, k + 1:, p] = cs[-1]
    return SortedInputs(jnp.asarray(srt, dtype), jnp.asarray(prefix, dtype), jnp.asarray(count))


def sorted_empirical_loss(flat, data: SortedInputs) -> jax.Array:
    """L_n on flat parameters from sorted inputs, exactly (module docstring), in O(c^2 log n).

        n L_n = sum_i sum_j [t^2 S_2(all) + ((t - a)^2 - t^2) S_2(A) - 2 (t - a) b S_1(A) + b^2 S_0(A)],
        a = G_ji = <W_j, W_i>,  b = b_j,  t = delta_ij,

    A the magnitudes of feature i where a mu + b > 0.  Slopes |a| below tiny^(1/4) of the dtype count as 0
    (active on all of feature i's inputs if b > 0, on none otherwise; an error below 4 tiny^(1/4) a term),
    as in ``slt_relu.tms.model.active_interval``.  A module-level function: a hashable loss for
    ``slt_relu.posterior.target.TemperedTarget``.

    Args:
        flat: (3 c,) parameters in the flat order of ``slt_relu.tms.model`` (W row-major, then b).
        data: :class:`SortedInputs` of one data set.

    Returns:
        () L_n, equal to ``slt_relu.tms.flat_empirical_loss(flat, x)``.

    References:
        Chen et al. 2023 (arXiv 2310.06301): the loss.
    """
    mu, prefix, count = data
    c = mu.shape[0]
    W = flat[: R_HIDDEN * c].reshape(R_HIDDEN, c)
    b = flat[R_HIDDEN * c:]
    G = W.T @ W                                                     # G[j, i] = <W_j, W_i>
    tiny = float(jnp.finfo(G.dtype).tiny) ** 0.25
    pos, neg = G > tiny, G < -tiny
    kink = -b[:, None] / jnp.where(pos | neg, G, 1.0)               # (j, i); unused where |G| <= tiny
    # m[j, i]: feature i's magnitudes <= the kink of output j
    m = jax.vmap(lambda s, k: jnp.searchsorted(s, k, side="right", method="scan"), (0, 1), 1)(mu, kink)
    m = jnp.minimum(m, count[None, :])
    full = jnp.broadcast_to(count[None, :], m.shape)
    whole = jnp.where(b[:, None] > 0, full, 0)
    lo = jnp.where(pos, m, 0)
    hi = jnp.where(pos, full, jnp.where(neg, m, whole))
    cols = jnp.arange(c)[None, :]
    S = prefix[cols, hi] - prefix[cols, lo]                         # (j, i, 3): S_0, S_1, S_2 over A
    t = jnp.eye(c, dtype=G.dtype)
    total2 = prefix[jnp.arange(c), count, 2]                         # (i,) S_2 over all of feature i
    bj = b[:, None]
    terms = (t * t * total2[None, :] + ((t - G) ** 2 - t * t) * S[..., 2] - 2 * (t - G) * bj * S[..., 1]
             + bj ** 2 * S[..., 0])
    return jnp.sum(terms) / jnp.sum(count)


# ----------------------------------------------------------------------------------------
# phases


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


# ----------------------------------------------------------------------------------------
# one n


def default_settings():
    """The SMC settings of the measurement (benchmarks/tms_transition.py, which checks them against twice the
    particles and twice the moves): 512 particles, 5 HMC moves of 8 leapfrog steps per stage, target ESS 0.5,
    all particles of a run moved together (the loss is cheap: :func:`sorted_empirical_loss`)."""
    from ..sampling import SMCSettings
    return SMCSettings(num_particles=512, num_mcmc_steps=5, num_leapfrog=8, target_ess=0.5, max_stages=400,
                       particle_batch=512)


def _check_settings(settings):
    from ..sampling import SMCSettings
    if settings is None:
        return default_settings()
    if not isinstance(settings, SMCSettings):
        raise ValueError(f"settings: expected slt_relu.sampling.SMCSettings, got {type(settings).__name__}")
    return settings


def _check_positive(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or \
            not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: expected a positive finite number, got {value!r}")
    return float(value)


def posterior_phase_masses(key, num_features: int, n: int, *, datasets: int = 4, runs: int = 4, settings=None,
                           prior_std: float = 1.0, beta: float = 1.0, inputs=None, pad_to: int | None = None,
                           length_threshold: float = 0.5, angle_tol: float = 0.25, dead_unused: bool = True,
                           keep_particles: bool = False):
    """Posterior masses and local free energies of the k-gon phases at one n, by tempered SMC.

    For each of K data sets (x_k: n inputs ``sample_inputs``), R independent adaptive tempered SMC runs
    from the prior N(0, prior_std^2 I_(3c)) to n beta on the TMS empirical loss (module docstring):

        p(w) proportional to phi(w) exp(-n beta L_n(w)),
        m_(k, alpha) = sum_r w_(k, r) (1/N) sum_s [label(w_(k, r, s)) = alpha],
        w_(k, r) = Z_(k, r) / sum_r' Z_(k, r'),
        F_(k, alpha) = -log Zbar_k - log m_(k, alpha),   Zbar_k = (1/R) sum_r Z_(k, r),

    the labels by :func:`phase_codes` (variants and groups: :func:`phase_names`); the pooled mass
    is the mean over data sets, with its standard error across data sets (se) and its Monte Carlo error
    from the runs (mcse, the delta method of ``slt_relu.posterior.masses.runs_mcse``).

    Args:
        key: a PRNG key, split once: data sets (key k of ``split(., K)`` draws data set k), prior draws, runs.
        num_features: c >= 2.
        n: the sample size, >= 1.
        datasets: K >= 1 data sets.
        runs: R >= 1 independent runs per data set (>= 2 for Monte Carlo errors; NaN with one).
        settings: ``slt_relu.sampling.SMCSettings`` (default :func:`default_settings`).
        prior_std: s > 0, the prior's standard deviation per coordinate (default 1: module docstring).
        beta: the inverse temperature > 0 (default 1).
        inputs: (K, n_0, c) data sets to use instead of drawing them (their first n inputs, n <= n_0), e.g.
            the nested data sets of :func:`bayesian_transition`.
        pad_to: pad the sorted data sets to this size (>= n; speed only: one compiled program for every n).
        length_threshold, angle_tol, dead_unused: the labelling rule's (:func:`phase_codes`).
        keep_particles: add the final particles, ``particles`` (dataset, run, particle, coordinate).

    Returns:
        xarray.Dataset with dims dataset (K), run (R), variant (the variants and "none"), phase (the
        groups and "none"): ``run_mass`` (dataset, run, variant) each run's fraction of particles,
        ``log_evidence`` (dataset, run), ``weight`` (dataset, run) the evidence weights, ``mass``
        (dataset, variant) and ``phase_mass`` (dataset, phase) pooled per data set, ``mass_mean``,
        ``mass_se``, ``mass_mcse`` (variant) and ``phase_mass_mean``, ``phase_mass_se``,
        ``phase_mass_mcse`` (phase) over data sets, ``log_z`` (dataset) log Zbar_k with ``log_z_mean``,
        ``log_z_se``, ``log_z_mcse``; ``free_energy`` (dataset, variant) and ``phase_free_energy`` (dataset,
        phase) F_alpha (inf for a phase without particles), ``relative_free_energy`` (variant) and
        ``phase_relative_free_energy`` (phase) -log of the mean mass; ``mean_loss`` (dataset, variant) the
        pooled mean L_n of each phase's particles (NaN where it has none); SMC diagnostics ``num_stages``
        and ``final_lambda`` (dataset, run), ``ess_min``, ``accept_min`` (dataset, run); attrs n, c,
        beta, prior_std, the settings, the labelling rule, wall_s.

    References:
        Chen et al. 2023 (arXiv 2310.06301): the phases' local free energies.
    """
    import time

    import xarray as xr

    from ..posterior.target import GaussianPrior, TemperedTarget
    from ..sampling import check_keys, sample, unravel_fn

    start = time.time()
    key = jax.random.wrap_key_data(check_keys(key, batch_ndim=0))
    c = check_count(num_features, "num_features", 2)
    n = check_count(n, "n")
    K, R = check_count(datasets, "datasets"), check_count(runs, "runs")
    settings = _check_settings(settings)
    prior_std = _check_positive(prior_std, "prior_std")
    beta = _check_positive(beta, "beta")
    _check_positive(length_threshold, "length_threshold")
    _check_positive(angle_tol, "angle_tol")
    dtype = jnp.zeros(()).dtype
    k_data, k_init, k_run = jax.random.split(key, 3)
    if inputs is None:
        xs = np.stack([np.asarray(sample_inputs(k, n, c, dtype)) for k in jax.random.split(k_data, K)])
    else:
        xs = np.asarray(inputs)
        if xs.ndim != 3 or xs.shape[0] != K or xs.shape[2] != c or xs.shape[1] < n:
            raise ValueError(f"inputs: expected data sets of shape ({K}, >= {n}, {c}), got {xs.shape}")
        xs = xs[:, :n]
    if pad_to is not None and check_count(pad_to, "pad_to") < n:
        raise ValueError(f"pad_to: expected at least n = {n}, got {pad_to}")
    data = [sorted_inputs(x, pad_to) for x in xs]
    batched = jax.tree.map(lambda *a: jnp.repeat(jnp.stack(a), R, axis=0), *data)       # (K R, ...)
    D = (R_HIDDEN + 1) * c
    _, unravel = unravel_fn(jnp.zeros(D, dtype))
    target = TemperedTarget(sorted_empirical_loss, unravel, GaussianPrior(prior_std))
    N = settings.num_particles
    init = prior_std * jax.random.normal(k_init, (K * R, N, D), dtype)
    t = jnp.full((K * R,), n * beta, dtype)
    draws = sample(jax.random.split(k_run, K * R), target, init, (batched, t), settings)

    z = jnp.asarray(draws.z)
    params = TMSParams(z[..., : R_HIDDEN * c].reshape(K * R, N, R_HIDDEN, c), z[..., R_HIDDEN * c:])
    codes, gcodes = phase_codes(params, length_threshold=length_threshold, angle_tol=angle_tol,
                                dead_unused=dead_unused)
    lz = np.asarray(draws.log_evidence, np.float64).reshape(K, R)
    loss = np.asarray(jax.vmap(jax.vmap(sorted_empirical_loss, (0, None)))(z, batched), np.float64)   # (K R, N)
    variables = _mass_variables(codes.reshape(K, R, N), lz, c, loss.reshape(K, R, N))

    st = draws.stats
    stages = np.asarray(st["num_stages"])
    used = np.arange(np.asarray(st["ess"]).shape[1])[None, :] < stages[:, None]
    ess_min = np.where(used, st["ess"], np.inf).min(1)
    acc_min = np.where(used, st["accept_prob"], np.inf).min(1)
    dkr = ("dataset", "run")
    sh = lambda a: np.asarray(a).reshape(K, R)
    out = xr.Dataset(
        {**variables,
         "num_stages": (dkr, sh(stages)), "final_lambda": (dkr, sh(st["final_lambda"])),
         "ess_min": (dkr, sh(ess_min)), "accept_min": (dkr, sh(acc_min))},
        coords=_coords(c, K, R),
        attrs={"n": n, "c": c, "beta": beta, "prior_std": prior_std, "num_particles": N,
               "settings": settings.model_dump_json(), "length_threshold": float(length_threshold),
               "angle_tol": float(angle_tol), "dead_unused": int(bool(dead_unused)),
               "grad_evals": int(np.sum(draws.grad_evals)), "wall_s": time.time() - start})
    if keep_particles:
        out["particles"] = (dkr + ("particle", "coordinate"), np.asarray(z).reshape(K, R, N, D))
        out["particle_loss"] = (dkr + ("particle",), loss.reshape(K, R, N))
    return out


def _coords(c: int, K: int, R: int) -> dict:
    variants, groups, group_of = phase_names(c)
    return {"dataset": np.arange(K), "run": np.arange(R), "variant": list(variants), "phase": list(groups),
            "group": ("variant", np.asarray(groups)[group_of])}


def _mass_variables(codes, log_evidence, c: int, loss=None) -> dict:
    """The mass and free-energy variables of :func:`posterior_phase_masses` from the particles' variant codes
    (K, R, N), the runs' log Z (K, R) and the particles' L_n (K, R, N) or None (no ``mean_loss``)."""
    from ..posterior.evidence import free_energies
    from ..posterior.masses import log_evidence_mcse, phase_masses

    K, R, N = codes.shape
    variants, groups, group_of = phase_names(c)
    ds_of = np.repeat(np.arange(K), R)
    lz = np.asarray(log_evidence, np.float64).reshape(-1)
    flat = codes.reshape(K * R, N)
    pv = phase_masses(flat, variants, ds_of, lz)
    pg = phase_masses(group_of[flat], groups, ds_of, lz)
    fv, fg = free_energies(lz, ds_of, pv), free_energies(lz, ds_of, pg)
    weights = _run_weights(lz.reshape(K, R))
    dkr = ("dataset", "run")
    out = {"run_mass": (dkr + ("variant",), pv.per_chain.reshape(K, R, -1)),
           "run_phase_mass": (dkr + ("phase",), pg.per_chain.reshape(K, R, -1)),
           "log_evidence": (dkr, lz.reshape(K, R)), "weight": (dkr, weights),
           "mass": (("dataset", "variant"), pv.per_dataset), "phase_mass": (("dataset", "phase"), pg.per_dataset),
           "mass_mean": ("variant", pv.mass), "mass_se": ("variant", pv.se), "mass_mcse": ("variant", pv.mcse_runs),
           "phase_mass_mean": ("phase", pg.mass), "phase_mass_se": ("phase", pg.se),
           "phase_mass_mcse": ("phase", pg.mcse_runs),
           "log_z": ("dataset", fv.log_evidence), "log_z_mean": ((), float(np.mean(fv.log_evidence))),
           "log_z_se": ((), fv.free_energy_se), "log_z_mcse": ((), log_evidence_mcse(lz, ds_of) if R > 1 else np.nan),
           "free_energy": (("dataset", "variant"), fv.phase_free_energy),
           "phase_free_energy": (("dataset", "phase"), fg.phase_free_energy),
           "relative_free_energy": ("variant", fv.relative_mean),
           "phase_relative_free_energy": ("phase", fg.relative_mean)}
    if loss is not None:                           # the mean L_n of each phase's particles, pooled like the masses
        onehot = codes[..., None] == np.arange(len(variants))
        sums = np.einsum("krn,krnp->krp", np.asarray(loss, np.float64), onehot) / N
        pooled = np.einsum("kr,krp->kp", weights, sums)
        with np.errstate(invalid="ignore", divide="ignore"):
            out["mean_loss"] = (("dataset", "variant"), pooled / pv.per_dataset)
    return out


def relabel(ds, *, length_threshold: float = 0.5, angle_tol: float = 0.25, dead_unused: bool = True):
    """The masses and free energies of a Dataset of :func:`posterior_phase_masses` or
    :func:`bayesian_transition` run with ``keep_particles``, under another labelling rule (:func:`phase_codes`),
    without sampling again; with a dim n, the crossovers are recomputed (:func:`add_crossovers`, the pairs
    and bootstrap size of the Dataset's attrs).

    Args:
        ds: the Dataset, with ``particles`` (..., dataset, run, particle, coordinate).
        length_threshold, angle_tol, dead_unused: the rule.

    Returns:
        A new Dataset with the mass, free-energy and mean-loss variables (and crossovers) of the new rule.
    """
    import xarray as xr

    if not isinstance(ds, xr.Dataset) or "particles" not in ds:
        raise ValueError("ds: expected a Dataset with particles (run with keep_particles=True)")
    _check_positive(length_threshold, "length_threshold")
    _check_positive(angle_tol, "angle_tol")
    c = int(ds.attrs["c"])
    rule = dict(length_threshold=length_threshold, angle_tol=angle_tol, dead_unused=dead_unused)

    def one(p):
        z = jnp.asarray(p["particles"].transpose("dataset", "run", "particle", "coordinate").values)
        K, R, N, _ = z.shape
        params = TMSParams(z[..., : R_HIDDEN * c].reshape(K, R, N, R_HIDDEN, c), z[..., R_HIDDEN * c:])
        codes, _ = phase_codes(params, **rule)
        loss = p["particle_loss"].values if "particle_loss" in p else None
        return p.assign(_mass_variables(codes, p["log_evidence"].values, c, loss))

    if "n" in ds.dims:
        out = xr.concat([one(ds.isel(n=i)) for i in range(ds.sizes["n"])], dim="n", data_vars="all",
                        coords="minimal", compat="override", join="outer")
        for v in ds.data_vars:                 # the variables without an n dim (the crossovers) are redone below
            if "n" not in ds[v].dims and v in out:
                out = out.drop_vars(v)
        out = add_crossovers(out, _pairs_of(ds), n_boot=int(ds.attrs.get("n_boot", 2000)))
    else:
        out = one(ds)
    out.attrs.update(ds.attrs)
    out.attrs.update(length_threshold=float(length_threshold), angle_tol=float(angle_tol),
                     dead_unused=int(bool(dead_unused)))
    return out


def _run_weights(log_evidence) -> np.ndarray:
    """(..., R) evidence weights of the runs of each data set, softmax over the last axis."""
    lz = np.asarray(log_evidence, np.float64)
    w = np.exp(lz - lz.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True)


# ----------------------------------------------------------------------------------------
# the crossover


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
    w = _run_weights(log_evidence)
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
    floor = 0.5 / (K * R * 1e4) if floor is None else _check_positive(floor, "floor")
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


def _pair_members(variants, groups, name: str):
    """(run variable, dim, name) of a phase name: a group ("5-gon") or a variant ("5-gon -")."""
    return ("run_phase_mass", "phase", name) if name in groups else ("run_mass", "variant", name)


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
    from a Dataset of :func:`bayesian_transition` (variables ``run_mass`` / ``run_phase_mass`` (n, dataset,
    run, ...) and ``log_evidence`` (n, dataset, run)); the floor is half a particle of all runs at an n."""
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
    beta = _check_positive(beta, "beta")
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

    beta = _check_positive(beta, "beta")
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
    rows = [r for r in kgon_table((c,)) if r.k in (k_a, k_b)]
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


# ----------------------------------------------------------------------------------------
# the sweep over n


def bayesian_transition(key, num_features: int, ns: Sequence[int], *, datasets: int = 4, runs: int = 4, settings=None,
                        prior_std: float = 1.0, beta: float = 1.0, pairs: Sequence[tuple[str, str]] | None = None,
                        n_boot: int = 2000, length_threshold: float = 0.5, angle_tol: float = 0.25,
                        dead_unused: bool = True, keep_particles: bool = False, refine: int = 0, progress=None):
    """The posterior masses and local free energies of the k-gon phases along n, and the crossovers.

    :func:`posterior_phase_masses` at every n of ``ns`` on nested data sets (data set k at n is the first n
    inputs of one sequence of max(ns) drawn with key k of the data key's split), then for each pair (a, b)
    the n where a takes the lead from b (:func:`transition_crossover`) beside the asymptotic formula's
    (:func:`formula_predictions`; :func:`formula_crossover` for a variant, :func:`formula_group_crossover`
    for a group).

    Args:
        key: a PRNG key, split once: data, then one key per n (``fold_in`` of the n's index).
        num_features: c >= 2.
        ns: increasing sample sizes (log-spaced around the transition), at least 2.
        datasets, runs, settings, prior_std, beta, length_threshold, angle_tol, dead_unused, keep_particles: as
            in :func:`posterior_phase_masses` (the data sets padded to max(ns): one compiled program).
        pairs: the (a, b) phase pairs (default: ("c-gon", "(c-1)-gon") and the c-gon against each
            (c-1)-gon variant).
        n_boot: bootstrap replicates of the crossovers' errors.
        refine: after the scan, this many more n log-spaced inside the bracket of the first pair's crossover
            (none if it has no bracket), so that the linear interpolation in log n spans a short interval
            (its error grows as the interval squared: the log ratio is nearly linear in n, not in log n).
        progress: called as progress(i, n, Dataset of that n) after each n (e.g. to print a table row).

    Returns:
        xarray.Dataset: the variables of :func:`posterior_phase_masses` with a leading dim n, and per
        ``comparison`` ("a vs b"): ``n_crossover``, ``n_crossover_se``, ``n_crossover_se_datasets``,
        ``n_crossover_se_runs``, ``crossover_found``, ``n_formula``, and ``log_mass_ratio`` (comparison, n);
        attrs as :func:`posterior_phase_masses`' without n, plus ``formula_dominant`` (the variant that
        dominates the b group at the formula's group crossover) and ``wall_s``.

    References:
        Chen et al. 2023 (arXiv 2310.06301): the Bayesian phase transitions of c = 6.
    """
    import time

    import xarray as xr

    from ..sampling import check_keys

    start = time.time()
    key = jax.random.wrap_key_data(check_keys(key, batch_ndim=0))
    c = check_count(num_features, "num_features", 2)
    try:
        ns_list = [check_count(v, "ns") for v in ns]
    except TypeError:
        raise ValueError(f"ns: expected a sequence of sample sizes, got {ns!r}") from None
    if len(ns_list) < 2 or any(b <= a for a, b in zip(ns_list, ns_list[1:])):
        raise ValueError(f"ns: expected at least 2 increasing sample sizes, got {ns_list}")
    K = check_count(datasets, "datasets")
    check_count(runs, "runs")
    settings = _check_settings(settings)
    n_boot = check_count(n_boot, "n_boot", 2)
    variants, groups, _ = phase_names(c)
    if pairs is None:
        top, below = f"{c}-gon", f"{c - 1}-gon"
        pairs = [(top, below)] + [(top, v) for v in variants if v.startswith(below + " ")]
    for a, b in pairs:
        for nm in (a, b):
            if nm not in variants and nm not in groups:
                raise ValueError(f"pairs: expected phase names of c = {c} ({', '.join(groups)} or a variant), "
                                 f"got {nm!r}")
    dtype = jnp.zeros(()).dtype
    k_data, k_n = jax.random.split(key)
    xs = np.stack([np.asarray(sample_inputs(k, ns_list[-1], c, dtype)) for k in jax.random.split(k_data, K)])
    points = []
    for i, n in enumerate(ns_list):
        p = posterior_phase_masses(jax.random.fold_in(k_n, i), c, n, datasets=K, runs=runs, settings=settings,
                                   prior_std=prior_std, beta=beta, inputs=xs, pad_to=ns_list[-1],
                                   length_threshold=length_threshold, angle_tol=angle_tol, dead_unused=dead_unused,
                                   keep_particles=keep_particles)
        points.append(p)
        if progress is not None:
            progress(i, n, p)
    refine = check_count(refine, "refine", 0)
    if refine:
        va, da, na = _pair_members(variants, groups, pairs[0][0])
        vb, db, nb = _pair_members(variants, groups, pairs[0][1])
        get = lambda v, d, nm: np.stack([p[v].sel({d: nm}).values for p in points])
        cr = crossover_from_masses(ns_list, get(va, da, na), get(vb, db, nb),
                                   np.stack([p["log_evidence"].values for p in points]), n_boot=2)
        if math.isfinite(cr.bracket[0]):
            lo, hi = cr.bracket
            extra = [int(round(v)) for v in np.exp(np.linspace(math.log(lo), math.log(hi), refine + 2)[1:-1])]
            extra = sorted(set(extra) - set(ns_list))
            for j, n in enumerate(extra):
                p = posterior_phase_masses(jax.random.fold_in(k_n, len(ns_list) + j), c, n, datasets=K, runs=runs,
                                           settings=settings, prior_std=prior_std, beta=beta, inputs=xs,
                                           pad_to=ns_list[-1], length_threshold=length_threshold,
                                           angle_tol=angle_tol, dead_unused=dead_unused,
                                           keep_particles=keep_particles)
                points.append(p)
                if progress is not None:
                    progress(len(ns_list) + j, n, p)
            order = np.argsort([p.attrs["n"] for p in points])
            points = [points[i] for i in order]
            ns_list = [int(p.attrs["n"]) for p in points]
    walls = [p.attrs["wall_s"] for p in points]
    attrs = {k: v for k, v in points[0].attrs.items() if k not in ("n", "wall_s", "grad_evals")}
    ds = xr.concat([p.drop_attrs() if hasattr(p, "drop_attrs") else p for p in points], dim="n",
                   data_vars="all", coords="minimal", compat="override", join="outer")
    ds = ds.assign_coords(n=np.asarray(ns_list))
    ds["wall_s"] = ("n", np.asarray(walls))
    ds["grad_evals"] = ("n", np.asarray([p.attrs["grad_evals"] for p in points]))
    ds.attrs = attrs
    ds = add_crossovers(ds, pairs, n_boot=n_boot)
    ds.attrs["wall_s"] = time.time() - start
    return ds


def _pairs_of(ds) -> list[tuple[str, str]]:
    return [tuple(str(v).split(" vs ")) for v in ds["comparison"].values]


def add_crossovers(ds, pairs: Sequence[tuple[str, str]] | None = None, *, n_boot: int = 2000):
    """The crossover variables of :func:`bayesian_transition` for a Dataset with a dim n (per ``comparison``
    "a vs b": ``n_crossover``, ``n_crossover_se``, ``n_crossover_se_datasets``, ``n_crossover_se_runs``,
    ``crossover_found``, ``n_formula``, ``log_mass_ratio`` (comparison, n)), replacing any there.

    Args:
        ds: a Dataset of :func:`bayesian_transition` (attrs c, beta).
        pairs: the (a, b) phase pairs (default: ("c-gon", "(c-1)-gon") and the c-gon against each (c-1)-gon
            variant).
        n_boot: bootstrap replicates.

    Returns:
        The Dataset with the variables and attrs ``formula_dominant``, ``n_boot``.
    """
    c, beta = int(ds.attrs["c"]), float(ds.attrs.get("beta", 1.0))
    variants, groups, _ = phase_names(c)
    if pairs is None:
        top, below = f"{c}-gon", f"{c - 1}-gon"
        pairs = [(top, below)] + [(top, v) for v in variants if v.startswith(below + " ")]
    pred = formula_predictions(c, beta=beta)
    names, rows = [], []
    for a, b in pairs:
        cr = transition_crossover(ds, a, b, n_boot=n_boot)
        if a == pred["a"] and b in pred["variants"]:
            nf = pred["variants"][b]["n_formula"]
        elif a == pred["a"] and b == f"{c - 1}-gon":
            nf = pred["group"]
        else:
            nf = float("nan")
        names.append(f"{a} vs {b}")
        rows.append((cr, nf))
    old = ("n_crossover", "n_crossover_se", "n_crossover_se_datasets", "n_crossover_se_runs", "crossover_found",
           "n_formula", "log_mass_ratio", "comparison")
    ds = ds.drop_vars([v for v in old if v in ds.variables])
    comp = ("comparison",)
    ds["n_crossover"] = (comp, [r[0].n for r in rows])
    ds["n_crossover_se"] = (comp, [r[0].se for r in rows])
    ds["n_crossover_se_datasets"] = (comp, [r[0].se_datasets for r in rows])
    ds["n_crossover_se_runs"] = (comp, [r[0].se_runs for r in rows])
    ds["crossover_found"] = (comp, [r[0].found for r in rows])
    ds["n_formula"] = (comp, [r[1] for r in rows])
    ds["log_mass_ratio"] = (comp + ("n",), np.stack([r[0].log_ratio for r in rows]))
    ds = ds.assign_coords(comparison=names)
    ds.attrs.update(formula_dominant=str(pred["dominant"]), n_boot=n_boot)
    return ds
