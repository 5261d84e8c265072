"""Experiment kind ``lambda_curve``: lambda and m of losses with known values, from tempered SMC's free-energy curves.

Each [[cases]] entry is a population loss K whose learning coefficient and multiplicity are known in
closed form (``slt_relu.known_lambda``), with the prior N(0, prior_std^2 I) on its parameters:

- ``normal_crossing``: K = prod_i w_i^(2 k_i) (k_i = 0: a coordinate K does not depend on);
- ``sum``: K = sum_i w_i^(2 k_i);
- ``regular``: K = w^T H w / 2 with H = A A^T / d + I (A a d x d standard normal matrix);
- ``reduced_rank``: y = B A x with x ~ N(0, I) and unit noise: K = |B A - C0|_F^2 / 2, C0 = B0 A0 of rank r;
- ``deep_linear``: K = |W_L ... W_1 - C0|_F^2 / 2, C0 of rank r;
- ``dslt_phase``: the local potential of one phase of W0 of a two-layer truth (``truth``, ``width``, ``phase``) on a
  ball of ``radius`` around the phase's representative, gauge-fixed (``slt_relu.known_lambda.phase``); its exact
  value is the first-principles count where it applies (else null), and the final particles' phases are reported;

(the truths' factors are standard normal, drawn from the case's key).  A case with ``n`` (every family but
dslt_phase) replaces K by a data set's loss: each run draws its own data set of n samples of the family's
unit-noise regression (``known_lambda.losses.RegressionLoss``: y = P(w0) x + e, x ~ N(0, Sigma)), its loss
L_n(w) - L_n(w0) from the data's sufficient statistics, t_max at most n (the Bayes posterior is t = n), and the
fit reads each run's L* with lambda (a linear term t L*: for the regular family exactly the data's minimum, for
singular ones an effective slope; and c3 / t, the regular directions' correction at the window's small t), so that
the runs' spread holds the data sets'.  For
every case, ``curve.runs`` independent SMC runs from the prior to t_max give F(t) and E_t[K] at every stage
(``slt_relu.posterior.free_energy_curve``; with ``smc.symmetry_moves``, on reduced_rank and deep_linear cases every
HMC move is followed by a proposal along the layers' GL(H) reparametrization, ``slt_relu.moves.LayerReparametrization``,
and the other families run without), and the three estimators read lambda and m off them (a run that stops
short of t_max is a ConfigError; one whose t E_t[K] on a population loss passes D, beyond lambda <= D / 2, a
warning: its particles left the posterior; so is a Gibbs, NUTS or SGLD chain's).  With [mcmc], a
fourth on every population case, ``nuts_tempered_loss``: NUTS's t E_t[K] at log-spaced t over the same window
(``slt_relu.posterior.estimand_curve``), read by the tempered_loss rule, with a warning where it and SMC's
reading of the same estimand differ by more than 3 combined standard errors.  With [sgld], on the same cases,
``sgld_tempered_loss``: full-batch SGLD's t E_t[K] over the window from the true set's deepest point, each t's
step tuned by pilot chains' MALA acceptance (``estimate_llc``'s estimand along t).  With [gibbs], on every
reduced_rank and deep_linear case (population or data), ``gibbs_tempered_loss``: the same estimand from the exact
blocked Gibbs sampler of deep linear networks (``slt_relu.posterior.linear_gibbs``), which needs no gradients and
reaches 10^4 to 10^5 parameters on a CPU.  [smc] is optional: without it, SMC's three estimators do not run, and
every case needs another ([mcmc], [sgld] or [gibbs]); a case that SMC, NUTS or SGLD reads has at most MAX_PARAMS
parameters, one that Gibbs alone reads at most MAX_GIBBS_PARAMS.  A case's
``prior_std``, ``t_max``, ``decades`` and ``runs`` override [curve]'s, and [mcmc]'s, [sgld]'s and [gibbs]'s ``t_max``
(and ``decades``) cut those samplers' windows (NUTS's chains from the prior do not settle within their warm-up at
t = 1e16, SGLD's single step per t mixes the less the larger t, and the Gibbs sampler's conditionals lose
float64's resolution past t = 1e14); its ``reference`` (another estimate of the
same lambda, e.g. SGLD's) is carried to the metrics and the figure for comparison.
Outputs: metrics.json (``cases``: name, family, num_params, n (null: K itself), lambda_exact (null if unknown),
m_exact, and per estimator lambda, lambda_se (with the choice of m where m is not identifiable), lambda_se_runs (over
runs alone), m (null where not identifiable), m_candidates (the m's the rule could not exclude), lambda_by_m,
lambda_se_by_m,
t_range (its fitted window: SMC's is the case's), loss_min (L*) and run_loss_min (each run's), NUTS's and SGLD's gradients (SGLD's also each t's t eps_t,
``step_scale``, and its chains' lowest mean MALA acceptance, ``accept_prob_min``) or Gibbs's sweeps, the fitted t range,
SMC's gradients (0 without [smc]) and whether its runs made symmetry moves (``symmetry_moves``); a dslt_phase case
also ``phase``, a reference case ``reference``, a two-parameter crossing, a zero-truth reduced-rank case with one
hidden unit (population) and a regular case (population or data) ``exact_check`` (its SMC free energy against the
exact one, by quadrature or in closed form, ``slt_relu.posterior.exact_free_energy``), ``curve``: the estimator
whose runs the figure and results.nc show (SMC's ``tempered_loss``, else Gibbs's, else NUTS's, else SGLD's);
``warnings``), results.nc (the estimates along (case, estimator) and those curves along
(case, run, stage)), lambda_curve.png.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..known_lambda.losses import RegressionLoss, family_lambda, family_loss, regression_statistics
from ..sampling import SMCSettings
from ..workflow.settings import ConfigError
from ..workflow.kind import Kind, Output, first_line, register_kind
from ..workflow.memory import Need
from ..workflow.schemas import case_example
from .lambda_curve_report import (GIBBS_ESTIMATOR, MCMC_ESTIMATOR, SGLD_ESTIMATOR, dataset, estimand_disagreement,
                                  estimate_entry, exact_free_energy_check, headline, left_the_posterior, phase_check)
from .lambda_curve_settings import (FAMILIES, LINEAR, MAX_GIBBS_PARAMS, MAX_PARAMS, PHASE_KEYS, CaseSettings,
                                    CurveSettings, GibbsSettings, MCMCSettings, SGLDCurveSettings, Settings)
from .lambda_readings import exact_free_energy, gibbs_reading, nuts_reading, sgld_reading, smc_moves

__all__ = []   # nothing to import: the kind runs through the registry (slt_relu.kinds.KINDS)

SAMPLERS = {"tempered_loss": "SMC", GIBBS_ESTIMATOR: "Gibbs", MCMC_ESTIMATOR: "NUTS", SGLD_ESTIMATOR: "SGLD"}


class Case(NamedTuple):
    """A case resolved: its settings, loss, parameter count, exact (lambda, m) (None where unknown), its [curve]
    with the case's overrides, for dslt_phase what the metrics report about the region, and for a data case its
    regression (P0 (b, a), the inputs' covariance factor C (a, a): x = C z) that draws the data sets."""

    settings: CaseSettings
    loss: object
    num_params: int
    lambda_exact: float | None
    m_exact: int | None
    curve: CurveSettings = CurveSettings()
    phase: dict | None = None
    regression: tuple | None = None


class Resolved(NamedTuple):
    curve: CurveSettings
    smc: SMCSettings | None
    cases: tuple
    mcmc: MCMCSettings | None = None
    gibbs: GibbsSettings | None = None
    sgld: SGLDCurveSettings | None = None


def _exact(c: CaseSettings, where: str, max_params: int):
    """(lambda, m, num_params, layer widths) of a case (``known_lambda.losses.family_lambda``), ConfigError naming a
    missing or bad key or more than max_params parameters; for dslt_phase (whose value needs its representative:
    ``known_lambda.phase.phase_case``) (None, None, a bound on D for n_in <= 2, None)."""
    if c.family == "dslt_phase":
        return None, None, (c.width or 1) * 4 + 1, None
    if c.k is not None and len(c.k) > MAX_PARAMS and c.family in ("normal_crossing", "sum"):
        raise ConfigError(f"{where}.k: expected at most {MAX_PARAMS} half-exponents, got {len(c.k)}")
    try:
        lam, m, D, layers = family_lambda(c.family, k=c.k, num_params=c.num_params, input_dim=c.input_dim,
                                          hidden=c.hidden, output_dim=c.output_dim, widths=c.widths,
                                          true_rank=c.true_rank)
    except ValueError as err:
        raise ConfigError(f"{where}.{err}") from None
    if D > max_params:
        why = ("the Gibbs sampler's bound" if max_params == MAX_GIBBS_PARAMS
               else "SMC's, NUTS's and SGLD's bound; the Gibbs sampler alone, without [smc], [mcmc] and [sgld], reads "
                    f"reduced_rank and deep_linear cases of up to {MAX_GIBBS_PARAMS}")
        raise ConfigError(f"{where}: expected at most {max_params} parameters ({why}), got {D}")
    return lam, m, D, layers


def _phase(c: CaseSettings, where: str):
    """A dslt_phase case's local potential (``known_lambda.phase.phase_case``), ConfigError naming the key at
    fault."""
    from ..known_lambda.phase import phase_case

    ex = case_example(c.truth, c.truth_options, where)
    try:
        return phase_case(ex.truth, ex.inputs, float(ex.sigma), c.width, c.phase, c.radius)
    except ValueError as err:
        name, _, rest = str(err).partition(": ")
        if name in ("truth", "inputs"):                     # the example's, which the case names by its truth
            raise ConfigError(f"{where}.truth: {c.truth!r}'s {name}: {rest}") from None
        raise ConfigError(f"{where}.{err}") from None


def resolve(s: Settings, raw=None) -> Resolved:
    import jax

    cases = []
    for i, c in enumerate(s.cases):
        where = f"cases[{i}]"
        curve = s.curve.model_copy(update={k: getattr(c, k) for k in ("prior_std", "t_max", "decades", "runs")
                                           if getattr(c, k) is not None})
        for k in PHASE_KEYS + ("truth_options",):
            given = bool(getattr(c, k)) if k == "truth_options" else getattr(c, k) is not None
            if c.family == "dslt_phase" and not given and k != "truth_options":
                raise ConfigError(f"{where}.{k}: expected a value for family 'dslt_phase'")
            if c.family != "dslt_phase" and given:
                raise ConfigError(f"{where}.{k}: only for family 'dslt_phase', got {getattr(c, k)!r} for family "
                                  f"{c.family!r}")
        if c.family == "dslt_phase" and c.n is not None:
            raise ConfigError(f"{where}.n: only for the families {', '.join(FAMILIES[:-1])}, got {c.n} for family "
                              f"'dslt_phase'")
        if c.n is not None and curve.t_max > c.n:
            key = f"{where}.t_max" if c.t_max is not None else "curve.t_max"
            raise ConfigError(f"{key}: expected at most n = {c.n} for the data case {where} (its posterior is "
                              f"t = n beta, beta <= 1), got {curve.t_max:g}")
        if curve.t_max * 10.0 ** -curve.decades <= 1.0:
            key = f"{where}.decades" if c.decades is not None else "curve.decades"
            raise ConfigError(f"{key}: expected a window above t = 1, below log10(t_max) = "
                              f"{math.log10(curve.t_max):.3g} decades for {where}, got {curve.decades:g}")
        if c.family == "dslt_phase" and s.smc is None:
            raise ConfigError(f"{where}: family 'dslt_phase' is read by SMC alone: expected an [smc] section")
        if c.family == "dslt_phase":
            if s.dtype != "float64":
                raise ConfigError(f"dtype: expected 'float64' for family 'dslt_phase' (t K at t = {curve.t_max:g} "
                                  f"needs float64's resolution), got {s.dtype!r}")
            ph = _phase(c, where)
            info = {"truth": c.truth, "truth_options": dict(c.truth_options), **ph.info}
            cases.append(Case(c, ph.loss, ph.num_params, ph.lambda_exact, ph.m_exact, curve, info))
            continue
        readers = _readers(s, c)
        for section, reader in (("mcmc", "nuts"), ("sgld", "sgld"), ("gibbs", "gibbs")):
            if reader in readers:
                getattr(s, section).checked_window(section, curve, where, case_t_max=c.t_max is not None,
                                                   fits_loss_min=c.n is not None)
        if not readers:
            raise ConfigError(f"{where}: no estimator reads this {c.family} case{' of data' if c.n else ''}: expected "
                              f"[smc] (every case), [mcmc] or [sgld] (population cases but dslt_phase) or [gibbs] ("
                              f"{' and '.join(LINEAR)})")
        lam, m, D, layers = _exact(c, where, MAX_GIBBS_PARAMS if readers == ["gibbs"] else MAX_PARAMS)
        loss, regression = family_loss(c.family, jax.random.fold_in(jax.random.key(s.seed), i), D, layers,
                                       tuple(c.k or ()), c.true_rank)
        if c.n is None:
            cases.append(Case(c, loss, D, float(lam), int(m), curve))
        else:
            loss = RegressionLoss(c.family, tuple(c.k or ()), tuple(layers or ()))
            cases.append(Case(c, loss, D, float(lam), int(m), curve, regression=regression))
    if len({c.name for c in s.cases}) != len(s.cases):
        raise ConfigError("cases: expected distinct names, got " + ", ".join(c.name for c in s.cases))
    return Resolved(s.curve, None if s.smc is None else s.smc.build(), tuple(cases), s.mcmc, s.gibbs, s.sgld)


def _readers(s: Settings, c: CaseSettings) -> list[str]:
    """The samplers that read a case: SMC every case, NUTS and SGLD population cases but dslt_phase, Gibbs
    reduced_rank and deep_linear."""
    population = c.n is None and c.family != "dslt_phase"
    return ([] if s.smc is None else ["smc"]) + (["nuts"] if s.mcmc is not None and population else []) + \
        (["sgld"] if s.sgld is not None and population else []) + \
        (["gibbs"] if s.gibbs is not None and c.family in LINEAR else [])


def run(r: Resolved, key, ctx) -> Output:
    import jax
    from tqdm.auto import tqdm

    from ..posterior.free_energy_curve import ESTIMATORS, fit_learning_coefficient, smc_free_energy_curve

    rows, curves, warnings = [], [], []
    for i, c in enumerate(tqdm(r.cases, desc="cases", disable=not ctx.progress, leave=False)):
        cv = c.curve
        run_data = None if c.regression is None else regression_statistics(
            jax.random.fold_in(jax.random.fold_in(key, i), 2), *c.regression, c.settings.n, cv.runs)
        estimators, shown, fits = {}, {}, []     # shown: each sampler's curve, the first for the figure
        if r.smc is not None:
            smc, moves = smc_moves(r.smc, c)
            curve = smc_free_energy_curve(jax.random.fold_in(key, i), c.loss, c.num_params, cv.t_max, smc,
                                          num_runs=cv.runs, prior_std=cv.prior_std, run_data=run_data, moves=moves)
            reached = float(np.nanmin(np.nanmax(curve.t, axis=1)))
            if reached < cv.t_max * (1 - 1e-9) and c.phase is None:
                raise ConfigError(f"cases[{i}] ({c.settings.name}): an SMC run stopped at t = {reached:.3g}, short of "
                                  f"t_max = {cv.t_max:g}, after smc.max_stages = {r.smc.max_stages} stages: expected a "
                                  "larger smc.max_stages (or a smaller t_max)")
            for name in ESTIMATORS:
                try:
                    fit = fit_learning_coefficient(curve, name, loss_min=0.0 if run_data is None else None,
                                                   decades=cv.decades, max_multiplicity=cv.max_multiplicity)
                except ValueError as err:           # too few stages in the window: the settings' doing
                    raise ConfigError(f"cases[{i}] ({c.settings.name}): {err}; see smc.target_ess, "
                                      "curve.decades") from None
                estimators[name] = estimate_entry(fit)
                fits.append(fit)
            shown["tempered_loss"] = curve
        if r.gibbs is not None and c.settings.family in LINEAR:
            shown[GIBBS_ESTIMATOR], estimators[GIBBS_ESTIMATOR], fit = gibbs_reading(
                jax.random.fold_in(jax.random.fold_in(key, i), 3), c, r.gibbs, run_data)
            fits.append(fit)
        if r.mcmc is not None and c.phase is None and run_data is None:
            shown[MCMC_ESTIMATOR], estimators[MCMC_ESTIMATOR], fit = nuts_reading(
                jax.random.fold_in(jax.random.fold_in(key, i), 1), c, r.mcmc)
            fits.append(fit)
        if r.sgld is not None and c.phase is None and run_data is None:
            shown[SGLD_ESTIMATOR], estimators[SGLD_ESTIMATOR], fit = sgld_reading(
                jax.random.fold_in(jax.random.fold_in(key, i), 4), c, r.sgld, warnings)
            fits.append(fit)
        for source, sampler in SAMPLERS.items():          # a population loss: t E_t[K] stays below D
            if source in shown and run_data is None:
                warnings += left_the_posterior(c.settings.name, shown[source], c.num_params, sampler)
        warnings += estimand_disagreement(c.settings.name, estimators)
        source = next(iter(shown))
        row = {"name": c.settings.name, "family": c.settings.family, "num_params": c.num_params, "n": c.settings.n,
               "lambda_exact": c.lambda_exact, "m_exact": c.m_exact, "t_range": list(fits[0].window),
               "grad_evals": 0 if r.smc is None else curve.grad_evals, "estimators": estimators, "curve": source}
        if c.phase is not None:
            row["phase"] = phase_check(c, curve, cv, warnings)
        if r.smc is not None:
            row["symmetry_moves"] = moves is not None
            exact = exact_free_energy(c, run_data)
            if exact is not None:
                row["exact_check"] = exact_free_energy_check(c.settings.name, exact, curve, fits[0].window, warnings)
        if c.settings.reference is not None:
            row["reference"] = c.settings.reference.model_dump()
        rows.append(row)
        curves.append(shown[source]._replace(particles=None, draw_loss=None))
    ds = dataset(rows, curves)
    metrics = {"cases": rows, **({"warnings": warnings} if warnings else {})}
    return Output(metrics, ds)


def figures(r: Resolved, ds) -> dict:
    """lambda_curve.png: every case's lambda by each estimator against the exact value, and the curves
    t (E_t[L] - L*) / lambda (:func:`slt_relu.plots.lambda_curve_figure`), from the results Dataset."""
    from ..plots import lambda_curve_figure

    return {"lambda_curve": lambda_curve_figure(ds)}


def memory(s) -> list[Need]:
    """The arrays a run must hold (``slt_relu.workflow.memory``), from its settings."""
    from ..posterior.estimand_curve import STEP_LADDER

    # each case against the bound of the samplers that read it (as resolve, which refuses a case none reads)
    bound = lambda c: MAX_GIBBS_PARAMS if _readers(s, c) == ["gibbs"] else MAX_PARAMS
    D = max([_exact(c, f"cases[{i}]", bound(c))[2] for i, c in enumerate(s.cases) if _readers(s, c)] or [1])
    runs = max(c.runs or s.curve.runs for c in s.cases)                 # a case's runs override [curve]'s
    out = []
    if s.smc is not None:
        out.append(Need("smc.num_particles, curve.runs, cases", "the particles and their moves of every run of the "
                        f"largest case ({D} parameters)", 2 * runs * s.smc.num_particles * D))
    if s.gibbs is not None:                # the chains run one after another; the output holds their means
        out.append(Need("gibbs.chains, cases", f"the Gibbs chains' layers, products and eigenbases of the largest case "
                        f"({D} parameters)", 4 * D + s.gibbs.chains * s.gibbs.temperatures))
    if s.mcmc is not None:
        m = s.mcmc
        out.append(Need("mcmc.temperatures, mcmc.chains, mcmc.num_samples, cases", "the kept NUTS draws of the largest "
                        f"case ({D} parameters)", m.temperatures * m.chains * m.num_samples * D))
    if s.sgld is not None:
        g = s.sgld
        rungs = len(STEP_LADDER)          # the pilots: two chains per rung and t; every step is held until thinned
        out.append(Need("sgld.temperatures, sgld.chains, sgld.num_steps, sgld.pilot_steps, cases", "the SGLD chains' "
                        f"steps of the largest case ({D} parameters), pilots included",
                        g.temperatures * (g.chains * g.num_steps + 2 * rungs * g.pilot_steps) * D))
    return out


KIND = register_kind(Kind("lambda_curve", Settings, resolve, run, headline, description=first_line(__doc__),
                          memory=memory, figures=figures))
