"""The Bayesian phase transition of the toy model of superposition, measured by tempered SMC.

The tempered posterior of the TMS (``slt_relu.models.tms``) on flat parameters w = (W, b), D = 3 c,

    p_n(w) proportional to phi(w) exp(-n beta L_n(w)),   phi = N(0, s^2 I_D),   beta = 1 by default,
    L_n(w) = (1/n) sum_k ||x_k - ReLU(W^T W x_k + b)||^2,   x_k = mu_k e_(i_k),

puts its mass near the k-gon critical points (``slt_relu.tms.critical_points``).  The phase of a draw is its k-gon
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
Z_r / sum Z_r'), with Monte Carlo errors from the runs' spread (the delete-one-run jackknife,
``slt_relu.posterior.masses.runs_mcse``); the spread over K data sets is the data's own variability.

The prior.  N(0, s^2) per coordinate with s = 1 by default: every refined k-gon's coordinates lie within
1.4 s of the origin, so the prior is of order one at each (the asymptotics n L + lambda log n do not
depend on s, which enters each phase's free energy at order one; docs/experiments/tms_transition.md).

The empirical loss it samples on: ``slt_relu.tms.sorted_loss``; the crossovers and the asymptotic
formula: ``slt_relu.tms.crossover``; the phase codes: ``slt_relu.tms.phases.phase_codes``.

References:
    Chen, Lau, Mendel, Wei, Murfet 2023, "Dynamical versus Bayesian phase transitions in a toy model of
    superposition", arXiv 2310.06301 (the k-gon phases, their local free energies, the transitions);
    Del Moral, Doucet & Jasra 2006 (tempered SMC); Watanabe 2009 (the free energy's asymptotics).
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..network import check_count
from .crossover import crossover_from_masses, evidence_weights, pair_formula, transition_crossover
from ..models.tms import R_HIDDEN, TMSParams, check_positive, sample_inputs
from .phases import phase_codes, phase_names
from .sorted_loss import sorted_empirical_loss, sorted_empirical_losses, sorted_inputs

__all__ = ["add_crossovers", "bayesian_transition", "default_settings", "posterior_phase_masses", "relabel"]


# ----------------------------------------------------------------------------------------
# one n


def default_settings():
    """The SMC settings of the measurement (experiments/tms_transition.toml, whose run checks them against twice
    the particles and twice the moves): 512 particles, 5 HMC moves of 8 leapfrog steps per stage, target ESS 0.5,
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
    from the runs (mcse, the jackknife of ``slt_relu.posterior.masses.runs_mcse``).

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

    from ..posterior.prior import Prior
    from ..posterior.target import TemperedTarget
    from ..pytree import unravel_fn
    from ..sampling import check_keys, sample

    start = time.time()
    key = jax.random.wrap_key_data(check_keys(key, batch_ndim=0))
    c = check_count(num_features, "num_features", 2)
    n = check_count(n, "n")
    K, R = check_count(datasets, "datasets"), check_count(runs, "runs")
    settings = _check_settings(settings)
    prior_std = check_positive(prior_std, "prior_std")
    beta = check_positive(beta, "beta")
    check_positive(length_threshold, "length_threshold")
    check_positive(angle_tol, "angle_tol")
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
    target = TemperedTarget(sorted_empirical_loss, unravel, Prior.normal(prior_std))
    N = settings.num_particles
    init = prior_std * jax.random.normal(k_init, (K * R, N, D), dtype)
    t = jnp.full((K * R,), n * beta, dtype)
    draws = sample(jax.random.split(k_run, K * R), target, init, (batched, t), settings)

    z = jnp.asarray(draws.z)
    params = TMSParams(z[..., : R_HIDDEN * c].reshape(K * R, N, R_HIDDEN, c), z[..., R_HIDDEN * c:])
    codes, gcodes = phase_codes(params, length_threshold=length_threshold, angle_tol=angle_tol,
                                dead_unused=dead_unused)
    lz = np.asarray(draws.log_evidence, np.float64).reshape(K, R)
    loss = np.asarray(sorted_empirical_losses(z, batched), np.float64)                               # (K R, N)
    variables = _mass_variables(codes.reshape(K, R, N), lz, c, loss.reshape(K, R, N))

    info = draws.info
    stages = np.asarray(info.num_stages)
    used = np.arange(np.asarray(info.ess).shape[1])[None, :] < stages[:, None]
    ess_min = np.where(used, info.ess, np.inf).min(1)
    acc_min = np.where(used, info.accept_prob, np.inf).min(1)
    dkr = ("dataset", "run")
    sh = lambda a: np.asarray(a).reshape(K, R)
    out = xr.Dataset(
        {**variables,
         "num_stages": (dkr, sh(stages)), "final_lambda": (dkr, sh(info.final_lambda)),
         "ess_min": (dkr, sh(ess_min)), "accept_min": (dkr, sh(acc_min))},
        coords=_coords(c, K, R),
        attrs={"n": n, "c": c, "beta": beta, "prior_std": prior_std, "num_particles": N,
               "settings": json.dumps(dataclasses.asdict(settings), separators=(",", ":")), "length_threshold": float(length_threshold),
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
    weights = evidence_weights(lz.reshape(K, R))
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
    check_positive(length_threshold, "length_threshold")
    check_positive(angle_tol, "angle_tol")
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
    (:func:`~slt_relu.tms.crossover.pair_formula`: ``formula_crossover`` for a variant b,
    ``formula_group_crossover`` for a group).

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
        dominates the first pair's b group at the formula's group crossover) and ``wall_s``.

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
        # a phase name's run masses: a group ("5-gon") or a variant ("5-gon -")
        get = lambda nm: np.stack([(p["run_phase_mass"].sel(phase=nm) if nm in groups else
                                    p["run_mass"].sel(variant=nm)).values for p in points])
        cr = crossover_from_masses(ns_list, get(pairs[0][0]), get(pairs[0][1]),
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
    names, rows = [], []
    for a, b in pairs:
        cr = transition_crossover(ds, a, b, n_boot=n_boot)
        nf, dominant = pair_formula(c, a, b, beta)
        names.append(f"{a} vs {b}")
        rows.append((cr, nf, dominant))
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
    ds.attrs.update(formula_dominant=str(rows[0][2]), n_boot=n_boot)
    return ds
