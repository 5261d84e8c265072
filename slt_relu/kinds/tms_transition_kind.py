"""Experiment kind ``tms_transition``: the TMS Bayesian transition between two k-gon phases, by tempered SMC along n.

The toy model of superposition's Bayesian phase transition, measured against the asymptotic formula.  The tempered posterior phi(w) exp(-n beta L_n(w)) of f(x) = ReLU(W^T W x + b) (W (2, c), b (c,); x = mu e_i;
phi = N(0, prior_std^2) per coordinate) at each n of ``transition.ns``, with K nested data sets and R independent
SMC runs per data set (``slt_relu.tms.transition.bayesian_transition``): the posterior mass of each k-gon phase
(``slt_relu.tms.phases.phase_codes``) pooled over a data set's runs by their evidence, its Monte Carlo error
from the runs (mcse) and its spread over the data sets (se), log Z, and the n where phase a takes the lead from
phase b (``transition.phases``, default the c-gon and the (c-1)-gon; log(M_a / M_b) interpolated linearly in
log n, its se a two-stage bootstrap over data sets and runs), for the groups and for a against each variant
of b, beside the asymptotic formula

    n beta (L_b - L_a) = (lambda_a - lambda_b) log(n beta)

from the exact losses and the first-principles lambdas (``slt_relu.tms.crossover.pair_formula``).  After the
scan, ``transition.refine`` more n inside the bracket of the grouped crossover.  Three checks of the
measurement (``slt_relu.tms.transition_checks``):

- ``[check]``: at the n nearest the crossover (without one: nearest the formula's n) the first ``check.datasets`` data sets again with ``check.factor``
  times the particles and the HMC moves per stage: the masses agree with the main run's within their combined
  Monte Carlo errors when the settings have converged (``check.max_abs_z``);
- the labelling rule: the same particles relabelled with the angle tolerance doubled and halved, and with dead
  columns counted by their length (``labelling_sensitivity``);
- the local free energies against their asymptotic form, G_alpha(n) = F_alpha - n beta L_n(w_alpha) =
  lambda_alpha log(n beta) + C_alpha (``free_energy_fits``: the slope beside the first-principles lambda, the
  constants, and the formula's n with them).

Outputs: metrics.json (``transition``: ``n_crossover``, ``n_crossover_se``, ``n_formula`` of the grouped
comparison; ``comparisons``: every pair; ``masses``: per n each phase's and variant's mass with its se and mcse,
log Z; ``check``; ``labelling_sensitivity``; ``free_energy_fits``; ``formula``; ``wall_s``), results.nc (dims n,
dataset, run, variant, phase, comparison, check_dataset; fit_phase: the local free energies the figure draws) and
transition.png (drawn from results.nc).

References:
    Chen, Lau, Mendel, Wei, Murfet 2023, "Dynamical versus Bayesian phase transitions in a toy model of
    superposition", arXiv 2310.06301; Watanabe 2009 (the free energy's asymptotics).
"""
from __future__ import annotations

import time
from typing import Annotated, Literal, NamedTuple

import numpy as np
from pydantic import Field

from ..sampling import SMCSettings
from ..workflow.settings import ConfigError, Section
from ..workflow.kind import Kind, Output, first_line, register_kind
from ..workflow.memory import Need
from ..workflow.schemas import Experiment, SMCSection, require_float64, require_increasing

__all__ = []   # nothing to import: the kind runs through the registry (slt_relu.kinds.KINDS)

MAX_C = 10                   # as the tms kind's table: the phases' variants grow like 2^(c - k)
DEFAULT_NS = (50, 83, 139, 232, 387, 646, 1077, 1797, 2997, 5000)       # 10 log-spaced from 50 to 5,000


class TransitionSettings(Section):
    c: int = Field(6, ge=2, le=MAX_C, description="the features c (W: (2, c))")
    phases: tuple[str, str] | None = Field(
        None, description="the phases (a, b) compared: two k-gon groups of c, a with the larger k (default: the "
                          "c-gon and the (c-1)-gon); a is also compared with each variant of b")
    ns: tuple[Annotated[int, Field(ge=1, le=1_000_000)], ...] = Field(
        DEFAULT_NS, min_length=2, max_length=64, description="the sample sizes n, increasing (log-spaced around the "
                                                             "transition; the data sets are nested along them)")
    refine: int = Field(2, ge=0, le=16, description="more n log-spaced inside the bracket of the grouped crossover "
                                                    "after the scan")
    datasets: int = Field(8, ge=2, le=64, description="K nested data sets (their spread: the se)")
    runs: int = Field(4, ge=2, le=64, description="R independent SMC runs per data set, pooled by their evidence "
                                                  "(their spread: the mcse)")
    prior_std: float = Field(1.0, gt=0, le=100, description="phi = N(0, prior_std^2) per coordinate")
    beta: float = Field(1.0, gt=0, le=1000, description="the inverse temperature")
    n_boot: int = Field(2000, ge=2, le=100_000, description="bootstrap replicates of the crossovers' se")


class LabelSettings(Section):
    length_threshold: float = Field(0.5, gt=0, le=10, description="a column longer than this is active")
    angle_tol: float = Field(0.25, gt=0, le=1, description="the angular gaps' tolerance relative to 2 pi / k")
    dead_unused: bool = Field(True, description="count a column whose output never fires (|W_i|^2 + b_i <= 0) as "
                                                "unused whatever its length")


class CheckSettings(Section):
    enabled: bool = Field(True, description="run the check at the n nearest the crossover (without one: nearest "
                                            "the formula's n, else the middle of the grid)")
    datasets: int = Field(4, ge=1, le=64, description="the first this many data sets (at most transition.datasets)")
    factor: int = Field(2, ge=2, le=8, description="the particles and HMC moves per stage multiplied by this")


class Settings(Experiment):
    """Experiment kind ``tms_transition``: the TMS Bayesian transition between two k-gon phases, by tempered SMC.

    The toy model of superposition's posterior mass of each k-gon phase along n, the n where one phase takes the
    lead from another, against the asymptotic formula (module docstring)."""

    kind: Literal["tms_transition"]
    transition: TransitionSettings = TransitionSettings()
    labels: LabelSettings = LabelSettings()
    check: CheckSettings = CheckSettings()
    smc: SMCSection = Field(description="the SMC runs at every n (all particles of a run moved together: "
                                         "particle_batch = num_particles)")


class Resolved(NamedTuple):
    settings: Settings
    pairs: tuple              # (a, b) first, then (a, each variant of b)
    check_smc: SMCSettings | None


def resolve(s: Settings, raw=None) -> Resolved:
    from ..tms.phases import phase_names

    t = s.transition
    require_float64(s.dtype, "tms_transition", f"n L_n at n = {max(t.ns)}")
    require_increasing(t.ns, "transition.ns")
    variants, groups, _ = phase_names(t.c)
    kgons = [g for g in groups if g != "none"]
    a, b = t.phases or (f"{t.c}-gon", f"{t.c - 1}-gon")
    if a not in kgons or b not in kgons or kgons.index(a) >= kgons.index(b):
        raise ConfigError(f"transition.phases: expected two k-gon groups of c = {t.c} ({', '.join(kgons)}), the "
                          f"first with the larger k, got {[a, b]}")
    pairs = ((a, b),) + tuple((a, v) for v in variants if v.startswith(b + " "))
    check_smc = None
    if s.check.enabled:
        f = s.check.factor
        try:
            check_smc = s.smc.build().replace(num_particles=f * s.smc.num_particles,
                                              num_mcmc_steps=f * s.smc.num_mcmc_steps,
                                              particle_batch=f * s.smc.particle_batch)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"check.factor: the check's SMC settings ({f} x the particles and moves) are invalid: "
                              f"{err}") from None
    return Resolved(s, pairs, check_smc)


# ----------------------------------------------------------------------------------------------
# the run


def run(r: Resolved, key, ctx) -> Output:
    import jax
    from tqdm.auto import tqdm

    from ..sampling import check_keys
    from ..tms import transition as T
    from ..tms import transition_checks as C

    start = time.time()
    s, t, lab = r.settings, r.settings.transition, r.settings.labels
    rule = dict(length_threshold=lab.length_threshold, angle_tol=lab.angle_tol, dead_unused=lab.dead_unused)
    bar = tqdm(total=len(t.ns) + t.refine, desc="n", disable=not ctx.progress, leave=False)

    def progress(i, n, p):
        bar.set_postfix_str(f"n = {n}: " + ", ".join(f"{nm} {float(p.phase_mass_mean.sel(phase=nm)):.3f}"
                                                     for nm in r.pairs[0]))
        bar.update()

    ds = T.bayesian_transition(key, t.c, list(t.ns), datasets=t.datasets, runs=t.runs, settings=s.smc.build(),
                               prior_std=t.prior_std, beta=t.beta, pairs=list(r.pairs), n_boot=t.n_boot,
                               refine=t.refine, keep_particles=True, progress=progress, **rule)
    bar.close()
    scan_s = time.time() - start
    root = jax.random.wrap_key_data(check_keys(key, batch_ndim=0))
    k_data, _ = jax.random.split(root)                     # bayesian_transition's split: its data sets
    xs = C.nested_inputs(k_data, t.c, int(ds.n.values[-1]), t.datasets)
    a, b = r.pairs[0]
    sensitivity = C.labelling_sensitivity(ds, f"{a} vs {b}", rule)
    curves = C.local_free_energies(ds, xs, a, b)
    fits = C.free_energy_fits(ds, xs, a, b, curves=curves)
    check, check_ds = None, None
    if r.check_smc is not None:
        check, check_ds = C.settings_check(jax.random.fold_in(root, 1_000_003), ds, xs, f"{a} vs {b}", r.check_smc,
                                           min(s.check.datasets, t.datasets), rule)
    results = ds.drop_vars(["particles", "particle_loss"]).merge(C.free_energy_dataset(ds, curves, fits))
    if check_ds is not None:
        results = results.merge(check_ds)
    metrics = _metrics(ds, r.pairs, check, sensitivity, fits)
    metrics["wall_s"] = {"scan": scan_s, "total": time.time() - start}
    return Output(metrics, results)


def _comparison(q) -> dict:
    return {k: float(q[k]) for k in ("n_crossover", "n_crossover_se", "n_crossover_se_datasets",
                                     "n_crossover_se_runs", "crossover_found", "n_formula")}


def _metrics(ds, pairs, check, sensitivity, fits) -> dict:
    from ..tms.crossover import formula_predictions, k_of, pair_formula

    c, beta = int(ds.attrs["c"]), float(ds.attrs["beta"])
    a, b = pairs[0]
    comps = {str(cmp): _comparison(ds.sel(comparison=cmp)) for cmp in ds.comparison.values}
    g = comps[f"{a} vs {b}"]
    dominant = ds.attrs.get("formula_dominant")
    masses = []
    for n in ds.n.values:
        p = ds.sel(n=n)
        per = lambda var, dim: {str(k): float(v) for k, v in zip(ds[dim].values, p[var].values)}
        used = p.mass_mean.values > 0
        masses.append({"n": int(n), "log_evidence": float(p.log_z_mean), "log_evidence_se": float(p.log_z_se),
                       "log_evidence_mcse": float(p.log_z_mcse),
                       "mass": per("phase_mass_mean", "phase"), "mass_se": per("phase_mass_se", "phase"),
                       "mass_mcse": per("phase_mass_mcse", "phase"),
                       "variant_mass": {str(k): float(v) for k, v, u in zip(ds.variant.values, p.mass_mean.values,
                                                                            used) if u},
                       "variant_mass_mcse": {str(k): float(v) for k, v, u in zip(ds.variant.values,
                                                                                 p.mass_mcse.values, used) if u},
                       "relative_free_energy": {str(k): float(v) for k, v in zip(
                           ds.phase.values, p.phase_relative_free_energy.values) if np.isfinite(v)},
                       "stages_mean": float(p.num_stages.mean()), "wall_s": float(p.wall_s)})
    variants_b = [v for _, v in pairs[1:]]
    formula = {"pair": [a, b], "a": None, "loss_a": None, "lambda_a": None, "variants": {}, "group": g["n_formula"],
               "dominant": None if dominant in (None, "None") else dominant}
    try:
        pred = formula_predictions(c, k_of(a), k_of(b), beta)
    except ValueError:                                  # no first-principles lambda for a, or none in b
        pred = None
    if pred is not None:
        formula.update(a=pred["a"], loss_a=pred["loss_a"], lambda_a=pred["lambda_a"], variants=pred["variants"])
    return {
        "transition": {"c": c, "phases": [a, b], "n_crossover": g["n_crossover"], "n_crossover_se": g["n_crossover_se"],
                       "n_formula": g["n_formula"],
                       "n_formula_variant": f"the {b} group" + (f", dominated by its {formula['dominant']} variant"
                                                                if formula["dominant"] else ""),
                       "n_formula_by_variant": {v: pair_formula(c, a, v, beta)[0] for v in variants_b}},
        "comparisons": comps, "masses": masses, "check": check, "labelling_sensitivity": sensitivity,
        "free_energy_fits": fits, "formula": formula}


def free_energy_panel(ds) -> dict:
    """The figure's free-energy panel from the results Dataset (``slt_relu.tms.transition_checks.free_energy_dataset``):
    per fitted phase the mean and se over data sets of G_alpha at each n of its fit, lambda and the fitted C."""
    from ..tms.transition_checks import standard_error

    out = {}
    for name in ds["fit_phase"].values:
        q = ds.sel(fit_phase=name)
        used = q["free_energy_fitted"].values.astype(bool)
        G = q["free_energy_less_loss"].transpose("n", "dataset").values[used]
        lam, C = float(q["fit_lambda"]), float(q["fit_C"])
        out[str(name)] = {"n": ds["n"].values[used], "G": np.nanmean(G, axis=1),
                          "G_se": np.array([standard_error(row[np.isfinite(row)]) for row in G]),
                          "lambda": lam if np.isfinite(lam) else None, "C": C if np.isfinite(C) else None}
    return out


def figures(r: Resolved, ds) -> dict:
    """transition.png (:func:`figure`) of the compared pair, from the results Dataset."""
    return {"transition": figure(ds, "{} vs {}".format(*r.pairs[0]))}


def figure(ds, comparison: str):
    """The masses, the log mass ratio of ``comparison`` with its crossover beside the formula's, and the local free
    energies (``slt_relu.plots.tms_transition_figure``), from the kind's results Dataset."""
    from ..plots import tms_transition_figure

    q = ds.sel(comparison=comparison)
    a, b = comparison.split(" vs ")
    return tms_transition_figure(
        ds["n"].values, ds["phase"].values, ds["phase_mass_mean"].values, ds["phase_mass_se"].values,
        q["log_mass_ratio"].values, float(q["n_crossover"]), float(q["n_crossover_se"]), float(q["n_formula"]),
        pair=(a, b),
        free_energy=free_energy_panel(ds) or None, beta=float(ds.attrs["beta"]),
        title=f"TMS c = {int(ds.attrs['c'])}, beta = {float(ds.attrs['beta']):g}: the posterior mass of each k-gon "
              f"phase (tempered SMC, {ds.sizes['dataset']} data sets x {ds.sizes['run']} runs per n), where the "
              f"{a} takes the lead from the {b}, and each phase's local free energy against its asymptotic form")


def memory(s) -> list[Need]:
    """The arrays a run must hold (``slt_relu.workflow.memory``), from its settings."""
    t, D = s.transition, 3 * s.transition.c
    runs = t.datasets * t.runs
    check = s.check.factor * s.smc.num_particles * min(s.check.datasets, t.datasets) * t.runs if s.check.enabled else 0
    return [Need("transition.ns, transition.refine, transition.datasets, transition.runs, smc.num_particles",
                 f"the kept particles of every n ({D} parameters; relabelled after the scan)",
                 (len(t.ns) + t.refine) * runs * s.smc.num_particles * (D + 1)),
            Need("transition.ns, transition.datasets, transition.runs", "the nested data sets, sorted per run",
                 runs * max(t.ns) * t.c * 2),
            Need("check.factor, check.datasets, smc.num_particles", "the check's particles and their moves",
                 2 * check * D)]


def headline(metrics: dict) -> list[str]:
    """The grouped crossover with its se against the formula, a against each variant of b, and the check."""
    t = metrics["transition"]
    a, b = t.get("phases", ("6-gon", "5-gon"))
    num = lambda v, fmt="{:.0f}": "none" if v is None else fmt.format(v)
    comps = metrics.get("comparisons", {})
    g = comps.get(f"{a} vs {b}", {})
    ns = [p["n"] for p in metrics.get("masses", [])] or [None]
    measured = (f"takes the lead from the {b} at n = {num(t['n_crossover'])} +- {num(t['n_crossover_se'])} (data "
                f"sets {num(g.get('n_crossover_se_datasets'))}, runs {num(g.get('n_crossover_se_runs'), '{:.1f}')})"
                if t["n_crossover"] is not None else f"does not take the lead from the {b} within n = {ns[0]} .. "
                                                     f"{ns[-1]}")
    out = [f"c = {t['c']}: the {a} {measured}; the asymptotic formula: {num(t['n_formula'])} "
           f"({t.get('n_formula_variant', b)})"]
    for name, q in comps.items():
        if name != f"{a} vs {b}":
            found = (f"n = {num(q['n_crossover'])} +- {num(q['n_crossover_se'])}" if q["n_crossover"] is not None
                     else "no crossover")
            out.append(f"{name}: {found}; formula {num(q['n_formula'])}")
    chk = metrics.get("check")
    if chk:
        out.append(f"check at n = {chk['n']} with {chk['particles']} particles and {chk['moves']} moves per stage "
                   f"({chk['datasets']} data sets): largest |difference| {chk['max_abs_z']:.2f} combined MC errors")
    return out


KIND = register_kind(Kind("tms_transition", Settings, resolve, run, headline, description=first_line(__doc__),
                          memory=memory, figures=figures))
