"""Experiment kind ``lambda_curve``: lambda and m of losses with known values, from tempered SMC's free-energy curves.

Each [[cases]] entry is a population loss K whose learning coefficient and multiplicity are known in
closed form (``slt_relu.known_lambda``), with the prior N(0, prior_std^2 I) on its parameters:

- ``normal_crossing``: K = prod_i w_i^(2 k_i) (k_i = 0: a coordinate K does not depend on);
- ``sum``: K = sum_i w_i^(2 k_i);
- ``regular``: K = w^T H w / 2 with H = A A^T / d + I (A a d x d standard normal matrix);
- ``reduced_rank``: y = B A x with x ~ N(0, I) and unit noise: K = |B A - C0|_F^2 / 2, C0 = B0 A0 of rank r;
- ``deep_linear``: K = |W_L ... W_1 - C0|_F^2 / 2, C0 of rank r;
- ``dslt_phase``: the local potential of one phase of W0 of a two-layer truth (``truth``, ``width``, ``phase``) on a
  ball of ``radius`` around the phase's representative, gauge-fixed (``slt_relu.kinds.lambda_phase``); its exact
  value is the first-principles count where it applies (else null), and the final particles' phases are reported;

(the truths' factors are standard normal, drawn from the case's key).  A case with ``n`` (every family but
dslt_phase) replaces K by a data set's loss: each run draws its own data set of n samples of the family's
unit-noise regression (``lambda_losses.RegressionLoss``: y = P(w0) x + e, x ~ N(0, Sigma)), its loss
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
from typing import Annotated, Literal, NamedTuple

import numpy as np
from pydantic import Field

from .. import known_lambda, truths
from ..posterior.linear_gibbs import MAX_WIDTH
from ..sampling import SMCSettings
from ..settings import SCALE_BOUND, ConfigError, Section
from ..workflow.kind import Kind, Output, first_line, register_kind
from ..workflow.memory import Need
from ..workflow.schemas import Experiment
from .lambda_losses import PolynomialLoss, ProductLoss, RegressionLoss, regression_statistics
from .lambda_readings import (GIBBS_ESTIMATOR, LINEAR, MCMC_ESTIMATOR, SGLD_ESTIMATOR, T_MAX_BOUND, GibbsSettings,
                              MCMCSettings, SGLDCurveSettings, estimand_disagreement, estimate_entry, exact_free_energy,
                              exact_free_energy_check, gibbs_reading, left_the_posterior, nuts_reading, sgld_reading,
                              smc_moves)

SAMPLERS = {"tempered_loss": "SMC", GIBBS_ESTIMATOR: "Gibbs", MCMC_ESTIMATOR: "NUTS", SGLD_ESTIMATOR: "SGLD"}
FAMILIES = ("normal_crossing", "sum", "regular", "reduced_rank", "deep_linear", "dslt_phase")
PHASE_KEYS = ("truth", "width", "phase", "radius")          # dslt_phase's own keys (all needed there, nowhere else)
MAX_PARAMS = 2000            # SMC's particles x parameters x runs per program stay in memory (and NUTS's draws)
MAX_GIBBS_PARAMS = 100_000   # a case that the Gibbs sampler alone reads: chains x parameters, sweeps of eigh
MAX_SAMPLES = 10 ** 6        # a data case's n: its runs' data sets are drawn in chunks (memory), n x runs in time


class ReferenceSettings(Section):
    name: str = Field(min_length=1, max_length=200, description="where the estimate comes from (e.g. a results folder)")
    estimate: float = Field(description="its lambda")
    se: float = Field(ge=0, description="its standard error")


class CaseSettings(Section):
    name: str = Field(min_length=1, max_length=100, description="the case's label")
    family: Literal["normal_crossing", "sum", "regular", "reduced_rank", "deep_linear", "dslt_phase"] = Field(
        description="the loss family (module docstring)")
    k: tuple[int, ...] | None = Field(None, description="normal_crossing, sum: the half-exponents k_i")
    num_params: int | None = Field(None, ge=1, le=MAX_PARAMS, description="regular: the parameters d")
    input_dim: int | None = Field(None, ge=1, le=MAX_WIDTH, description="reduced_rank, deep_linear: the input width")
    hidden: int | None = Field(None, ge=1, le=MAX_WIDTH, description="reduced_rank: the hidden width")
    output_dim: int | None = Field(None, ge=1, le=MAX_WIDTH, description="reduced_rank: the output width")
    widths: tuple[Annotated[int, Field(ge=1, le=MAX_WIDTH)], ...] | None = Field(
        None, min_length=1, max_length=16, description="deep_linear: hidden widths, then the output width")
    true_rank: int = Field(0, ge=0, description="reduced_rank, deep_linear: the rank r of the true map")
    n: int | None = Field(None, ge=2, le=MAX_SAMPLES, description="every family but dslt_phase: a data set of n "
                          "samples per run (RegressionLoss) instead of K itself; needs t_max <= n")
    truth: Literal[tuple(truths.names())] | None = Field(None, description="dslt_phase: a registered example "
                                                         "(slt_relu.truths) with uniform inputs")
    truth_options: dict = Field({}, description="dslt_phase: the example's options, e.g. { v = 1.0 }")
    width: int | None = Field(None, ge=1, le=8, description="dslt_phase: the model's hidden nodes")
    phase: str | None = Field(None, max_length=200, description="dslt_phase: the phase of W0, its label as "
                              "slt_relu.phases prints it (e.g. \"+ | 1 degenerate\")")
    radius: float | None = Field(None, gt=0, le=10, description="dslt_phase: the region's ball |z| <= radius")
    prior_std: float | None = Field(None, gt=0, le=SCALE_BOUND, description="overrides curve.prior_std")
    t_max: float | None = Field(None, gt=1, le=T_MAX_BOUND, description="overrides curve.t_max")
    decades: float | None = Field(None, gt=0, le=24, description="overrides curve.decades")
    runs: int | None = Field(None, ge=2, le=256, description="overrides curve.runs")
    reference: ReferenceSettings | None = Field(None, description="another estimate of this lambda, shown beside")


class CurveSettings(Section):
    t_max: float = Field(1e8, gt=1, le=T_MAX_BOUND, description="the largest inverse temperature t = n beta")
    decades: float = Field(5.0, gt=0, le=24, description="the fitted window: the last decades of t")
    runs: int = Field(8, ge=2, le=256, description="independent SMC runs per case (their spread: the errors)")
    prior_std: float = Field(1.0, gt=0, le=SCALE_BOUND, description="the prior N(0, prior_std^2 I)")
    max_multiplicity: int = Field(3, ge=1, le=8, description="the largest candidate m")


class Settings(Experiment):
    kind: Literal["lambda_curve"]
    curve: CurveSettings = CurveSettings()
    mcmc: MCMCSettings | None = Field(None, description="when set, the estimator nuts_tempered_loss on every "
                                      "population case (not dslt_phase, whose ball NUTS does not keep, nor a data "
                                      "case)")
    sgld: SGLDCurveSettings | None = Field(None, description="when set, the estimator sgld_tempered_loss on every "
                                           "population case (not dslt_phase, nor a data case)")
    gibbs: GibbsSettings | None = Field(None, description="when set, the estimator gibbs_tempered_loss on every "
                                        "reduced_rank and deep_linear case")
    smc: SMCSettings | None = Field(None, description="the SMC runs, for the estimators free_energy, tempered_loss "
                                    "and thermodynamic on every case (a target_ess near 1 gives the stages the fit "
                                    "needs: 0.9 gives 4-10 a decade); without it, [mcmc], [sgld] or [gibbs] reads "
                                    "the cases")
    cases: tuple[CaseSettings, ...] = Field(min_length=1, max_length=64, description="the losses")


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
    """(lambda, m, num_params, widths) of a case, ConfigError naming a missing or bad key or more than max_params
    parameters; for dslt_phase (whose value needs its representative: ``lambda_phase.resolve_phase``) (None, None, a
    bound on D for n_in <= 2, None)."""
    if c.family == "dslt_phase":
        return None, None, (c.width or 1) * 4 + 1, None

    def need(*keys):
        for k in keys:
            if getattr(c, k) is None:
                raise ConfigError(f"{where}.{k}: expected a value for family {c.family!r}")
    try:
        if c.family in ("normal_crossing", "sum"):
            need("k")
            if len(c.k) > MAX_PARAMS:
                raise ValueError(f"k: expected at most {MAX_PARAMS} half-exponents, got {len(c.k)}")
            lam, m = known_lambda.normal_crossing(c.k, "product" if c.family == "normal_crossing" else "sum")
            return lam, m, len(c.k), None
        if c.family == "regular":
            need("num_params")
            lam, m = known_lambda.regular(c.num_params)
            return lam, m, c.num_params, None
        if c.family == "reduced_rank":
            need("input_dim", "hidden", "output_dim")
            widths = (c.input_dim, c.hidden, c.output_dim)
            lam, m = known_lambda.reduced_rank(*widths, true_rank=c.true_rank)
        else:
            need("input_dim", "widths")
            widths = (c.input_dim,) + tuple(c.widths)
            lam, m = known_lambda.deep_linear(c.input_dim, c.widths, c.true_rank)
    except ConfigError:
        raise
    except ValueError as err:
        raise ConfigError(f"{where}.{err}") from None
    D = sum(a * b for a, b in zip(widths[:-1], widths[1:]))
    if D > max_params:
        why = ("the Gibbs sampler's bound" if max_params == MAX_GIBBS_PARAMS
               else "SMC's, NUTS's and SGLD's bound; the Gibbs sampler alone, without [smc], [mcmc] and [sgld], reads "
                    f"reduced_rank and deep_linear cases of up to {MAX_GIBBS_PARAMS}")
        raise ConfigError(f"{where}: expected at most {max_params} parameters ({why}), got {D}")
    return lam, m, D, widths


def resolve(s: Settings, raw=None) -> Resolved:
    import jax

    from .lambda_phase import resolve_phase

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
            ph = resolve_phase(c.truth, c.truth_options, c.width, c.phase, c.radius, where)
            cases.append(Case(c, ph.loss, ph.num_params, ph.lambda_exact, ph.m_exact, curve, ph.info))
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
        lam, m, D, widths = _exact(c, where, MAX_GIBBS_PARAMS if readers == ["gibbs"] else MAX_PARAMS)
        key = jax.random.fold_in(jax.random.key(s.seed), i)
        if c.family == "regular":
            A = np.asarray(jax.random.normal(key, (D, D)), np.float64)
            H = A @ A.T / D + np.eye(D)
            loss, regression = PolynomialLoss("regular", (), tuple(map(tuple, H))), (np.zeros((1, D)),
                                                                                     np.linalg.cholesky(H))
        elif widths is None:
            loss = PolynomialLoss(c.family, tuple(c.k))
            b = 1 if c.family == "normal_crossing" else len(c.k)
            regression = (np.zeros((b, 1)), np.ones((1, 1)))
        else:
            k1, k2 = jax.random.split(key)
            r = c.true_rank
            left = np.asarray(jax.random.normal(k1, (widths[-1], r)), np.float64)
            right = np.asarray(jax.random.normal(k2, (r, widths[0])), np.float64)
            loss = ProductLoss(widths, tuple(map(tuple, left @ right)))
            regression = (left @ right, np.eye(widths[0]))
        if c.n is None:
            cases.append(Case(c, loss, D, float(lam), int(m), curve))
        else:
            loss = RegressionLoss(c.family, tuple(c.k or ()), tuple(widths or ()))
            cases.append(Case(c, loss, D, float(lam), int(m), curve, regression=regression))
    if len({c.name for c in s.cases}) != len(s.cases):
        raise ConfigError("cases: expected distinct names, got " + ", ".join(c.name for c in s.cases))
    return Resolved(s.curve, s.smc, tuple(cases), s.mcmc, s.gibbs, s.sgld)


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
               "lambda_exact": c.lambda_exact, "m_exact": c.m_exact, "t_range": list(fits[0].t_range),
               "grad_evals": 0 if r.smc is None else curve.grad_evals, "estimators": estimators, "curve": source}
        if c.phase is not None:
            row["phase"] = _phase_check(c, curve, cv, warnings)
        if r.smc is not None:
            row["symmetry_moves"] = moves is not None
            exact = exact_free_energy(c, run_data)
            if exact is not None:
                row["exact_check"] = exact_free_energy_check(c.settings.name, exact, curve, fits[0].t_range, warnings)
        if c.settings.reference is not None:
            row["reference"] = c.settings.reference.model_dump()
        rows.append(row)
        curves.append(shown[source]._replace(particles=None))
    from ..plots import lambda_curve_figure

    fig = lambda_curve_figure(rows, curves)
    metrics = {"cases": rows, **({"warnings": warnings} if warnings else {})}
    return Output(metrics, _dataset(rows, curves), {"lambda_curve": fig})


def _phase_check(c: Case, curve, cv: CurveSettings, warnings: list) -> dict:
    """A dslt_phase case's region report: its settings and checks, with the final particles' phases (a warning
    where under 90 % of them are in the case's phase: the ball then holds another phase that takes over)."""
    from .lambda_phase import final_phases

    out = {**c.phase, "prior_std": cv.prior_std}
    fractions = final_phases(c.loss, curve.particles, cv.t_max)
    out["final_phases"] = fractions
    out["final_phase_fraction"] = fractions.get(c.phase["label"], 0.0)
    if out["final_phase_fraction"] < 0.9:
        warnings.append(f"{c.settings.name}: {100 * out['final_phase_fraction']:.0f} % of the final particles are in "
                        f"the phase {c.phase['label']!r} ({fractions}): the ball holds another phase")
    if float(np.nanmin(np.nanmax(curve.t, axis=1))) < cv.t_max * (1 - 1e-9):
        warnings.append(f"{c.settings.name}: an SMC run stopped short of t_max (smc.max_stages)")
    return out


def _dataset(rows, curves):
    """Estimates along (case, estimator), curves along (case, run, stage) NaN-padded."""
    import xarray as xr

    from ..posterior.free_energy_curve import ESTIMATORS, stack_curves

    names = [e for e in ESTIMATORS + (GIBBS_ESTIMATOR, MCMC_ESTIMATOR, SGLD_ESTIMATOR) if any(e in row["estimators"] for row in rows)]
    value = lambda row, e, key: row["estimators"].get(e, {}).get(key)
    est = lambda key: np.array([[np.nan if value(row, e, key) is None else value(row, e, key) for e in names]
                                for row in rows], np.float64)
    return xr.Dataset(
        {"lambda": (("case", "estimator"), est("lambda")), "lambda_se": (("case", "estimator"), est("lambda_se")),
         "lambda_se_runs": (("case", "estimator"), est("lambda_se_runs"), {"long_name": "lambda's standard error over "
                                                                           "runs alone, at the reported m"}),
         "m": (("case", "estimator"), est("m"), {"long_name": "multiplicity, NaN where not identifiable"}),
         "lambda_exact": ("case", np.array([np.nan if row["lambda_exact"] is None else row["lambda_exact"]
                                            for row in rows], np.float64), {"long_name": "exact lambda, NaN: unknown"}),
         "m_exact": ("case", np.array([row["m_exact"] or 0 for row in rows], np.int64), {"long_name": "0: unknown"}),
         "n": ("case", np.array([row["n"] or 0 for row in rows], np.int64),
               {"long_name": "samples per data set, 0: the population loss K"}),
         "t": (("case", "run", "stage"), stack_curves(curves, "t")),
         "free_energy": (("case", "run", "stage"), stack_curves(curves, "free_energy"), {"long_name": "F(t) = -log Z(t)"}),
         "mean_loss": (("case", "run", "stage"), stack_curves(curves, "mean_loss"), {"long_name": "E_t[K]"})},
        coords={"case": [row["name"] for row in rows], "estimator": names,
                "family": ("case", [row["family"] for row in rows]),
                "curve": ("case", [row["curve"] for row in rows], {"long_name": "the estimator whose runs t, "
                                                                   "free_energy and mean_loss hold"})})


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


def headline(metrics: dict) -> list[str]:
    """Per case: the exact lambda (m) and each estimator's lambda +- se with its m ('?' where not identifiable; then
    also lambda +- se at the exact m where that is another), the reference beside it where the case has one; then
    the warnings."""
    out = []
    for row in metrics.get("cases", []):
        parts = []
        for e, v in row["estimators"].items():
            parts.append(f"{e}: {v['lambda']:.4g} +- {v['lambda_se']:.2g} m {v['m'] if v['m'] is not None else '?'}")
            at = str(row["m_exact"])           # the same fit's number where the exact m is the chosen one
            if v["m"] is None and at in v.get("lambda_se_by_m", {}) and v["lambda_by_m"][at] != v["lambda"]:
                parts[-1] += f" (at m {at}: {v['lambda_by_m'][at]:.4g} +- {v['lambda_se_by_m'][at]:.2g})"
        exact = ("no exact value" if row["lambda_exact"] is None
                 else f"exact {row['lambda_exact']:.4g} (m {row['m_exact']})")
        ref = row.get("reference")
        if ref:
            parts.append(f"{ref['name']}: {ref['estimate']:.4g} +- {ref['se']:.2g}")
        out.append(f"{row['name']}: {exact}; " + "; ".join(parts))
    return out + [f"warning: {w}" for w in metrics.get("warnings", [])]


KIND = register_kind(Kind("lambda_curve", Settings, resolve, run, headline, description=first_line(__doc__),
                          memory=memory))
