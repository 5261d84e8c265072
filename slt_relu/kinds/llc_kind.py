"""Experiment kind ``learning_coefficient``: lambda by SGLD (local), the NUTS beta sweep (global) and WBIC, on cases with known values or at the phases of W0 (slt_relu.posterior.llc).

Cases ([[cases]]) are ``two_layer`` (a registered truth; ``at = "truth"``: the truth padded with
zero nodes to the width, or ``"phases"``: one representative of every phase of W0 of the
truth's irreducible form; ``true_lambda`` a number or "regular" = (D - d)/2) or ``monomial``
(f(x, w) = (prod_i w_i^k_i) x against theta0 x, x ~ U[-sqrt3, sqrt3], sigma^2 = 1/2, so
K = (prod w^k - theta0)^2 exactly: at w* = 0 (theta0 = 0) a normal crossing with
lambda = 1 / (2 max k), whose row also holds the exact finite-n value E[n beta K] of the
localized posterior (llc.normal_crossing_expectation); theta0 != 0: lambda = 1/2).  A case's
``sgld`` / ``beta_sweep`` tables override [llc.sgld] / [llc.beta_sweep] key by key.  Each case
(and the calibration) is checkpointed when done, so an interrupted run resumes.

``refine`` (default true) localises SGLD (and a localized beta sweep) at the local minimum of L_n
next to the two-layer point (llc.minimize_loss), not at the point itself, which misses it by
O(1/sqrt n) and so lowers lambda_hat by n beta (L_n(w*) - L_n(w_hat)).

Outputs: metrics.json ("cases": a list of {name, true_lambda, estimate, se, method, ...}), results.nc (the
estimates, the beta sweeps' points, the SGLD traces and the calibration grid as one labelled Dataset,
llc_cases.dataset), llc.png (estimates against the known values), beta_sweep.png, calibration.png (drawn from
results.nc), draws/ (ArviZ data of the SGLD traces).
"""
from __future__ import annotations

from functools import partial
from typing import Annotated, Literal, NamedTuple, Union

import numpy as np
from pydantic import Field, model_validator

from ..workflow.settings import SCALE_BOUND, ConfigError, Section, parse
from ..workflow.kind import Kind, Output, first_line, register_kind
from ..workflow.memory import Need, params
from ..workflow.schemas import CASE_TRUTH_WORDS, Experiment, LLCSection, NUTSSection, case_example
from ..workflow.sweep import Point, fingerprint, run_points
from .llc_cases import Case, calibration_result, case_result, dataset

__all__ = []   # nothing to import: the kind runs through the registry (slt_relu.kinds.KINDS)

Method = Literal["sgld", "beta_sweep", "wbic"]


class SGLDTable(LLCSection):
    """[llc.sgld]: estimate_llc's settings (the schema of posterior.llc.LLCSettings) with the kind's defaults."""

    num_steps: int = Field(20000, ge=1, description="SGLD steps per chain")
    num_burnin: int = Field(5000, ge=0, description="first steps dropped")
    step_size: float = Field(1e-5, gt=0, le=SCALE_BOUND, description="eps")
    num_chains: int = Field(8, ge=1, description="chains, vmapped in one program")
    localization: float = Field(1.0, ge=0, le=SCALE_BOUND ** 2, description="gamma of exp(-n beta L_n - gamma/2 |w - w*|^2)")


class BetaSweepSettings(NUTSSection):
    """[llc.beta_sweep]: NUTS's settings with the sweep's defaults, and the sweep itself."""

    num_warmup: int = Field(500, ge=0, description="warm-up iterations per chain")
    symmetry_moves: Literal[False] = Field(False, description="not here: the sweep's loss is any function, with no "
                                           "orientation flip")
    factors: tuple[Annotated[float, Field(ge=1e-6)], ...] = Field(
        (2 / 3, 1.0, 1.5, 2.0, 3.0), min_length=2, description="betas as multiples of 1/log n")
    chains_per_beta: int = Field(4, ge=1, description="NUTS chains per beta")
    prior_std: float = Field(1.0, gt=0, le=SCALE_BOUND, description="N(0, prior_std^2) prior of the global posterior")
    localization: float = Field(0.0, ge=0, le=SCALE_BOUND ** 2, description="0: the global posterior; gamma > 0: the localized one "
                                "around the case's point (its slope is the local lambda)")


class CalibrationSettings(Section):
    case: str = Field(description="the case whose first point is calibrated")
    step_sizes: tuple[Annotated[float, Field(gt=0)], ...] = Field(min_length=1, description="SGLD step sizes")
    localizations: tuple[Annotated[float, Field(ge=0)], ...] = Field(min_length=1, description="gammas")
    num_steps: int | None = Field(None, ge=2, description="steps per chain (default: the case's)")
    num_burnin: int | None = Field(None, ge=0, description="burn-in (default: the case's)")


class _Case(Section):
    name: str = Field(description="the case's name")
    methods: tuple[Method, ...] | None = Field(None, min_length=1, description="overrides [llc] methods")
    sgld: SGLDTable = SGLDTable()
    beta_sweep: BetaSweepSettings = BetaSweepSettings()


class TwoLayerCase(_Case):
    model: Literal["two_layer"]
    truth: str = Field(max_length=1000, description=CASE_TRUTH_WORDS)
    truth_options: dict = Field({}, description="the example's options, e.g. { v = 2.0 }, or your truth's")
    width: int | None = Field(None, ge=1, le=16, description="model width (default: the example's model)")
    at: Literal["truth", "phases"] = Field("truth", description="the truth (padded to the width) or one "
                                           "representative of every phase of W0")
    true_lambda: Annotated[float, Field(gt=0)] | Literal["regular"] | None = Field(
        None, description="the known lambda, or \"regular\" = (D - d) / 2")


class MonomialCase(_Case):
    model: Literal["monomial"]
    exponents: tuple[Annotated[int, Field(ge=1, le=10)], ...] = Field(min_length=1, description="k_i of prod w_i^k_i")
    theta0: float = Field(0.0, ge=0, le=SCALE_BOUND, description="the truth's slope")


class LLCTable(Section):
    n: int = Field(10000, ge=10, le=10_000_000, description="data set size")
    methods: tuple[Method, ...] = Field(("sgld", "beta_sweep"), min_length=1, description="estimators")
    refine: bool = Field(True, description="localise at the minimum of L_n next to the point")
    sgld: SGLDTable = SGLDTable()
    beta_sweep: BetaSweepSettings = BetaSweepSettings()
    calibration: CalibrationSettings | None = Field(None, description="estimate_llc over step sizes x "
                                                    "localizations (calibration.png)")


class Settings(Experiment):
    kind: Literal["learning_coefficient"]
    llc: LLCTable
    cases: tuple[Annotated[Union[TwoLayerCase, MonomialCase], Field(discriminator="model")], ...] = Field(
        min_length=1, description="the cases ([[cases]])")
    save_draws: bool | None = Field(None, description="write each SGLD estimate's loss traces as ArviZ netCDF "
                                    "(draws/case-NN-K.nc; default: when they take at most 50 MB)")

    @model_validator(mode="before")
    @classmethod
    def _case_defaults(cls, data):
        """A case's sgld / beta_sweep tables override [llc.sgld] / [llc.beta_sweep] key by key;
        its methods default to [llc] methods."""
        if not isinstance(data, dict) or not isinstance(data.get("llc"), dict) or not isinstance(
                data.get("cases"), tuple):
            return data
        llc = data["llc"]
        cases = []
        for case in data["cases"]:
            if isinstance(case, dict):
                case = dict(case)
                for table in ("sgld", "beta_sweep"):
                    base, own = llc.get(table, {}), case.get(table, {})
                    if isinstance(base, dict) and isinstance(own, dict):
                        case[table] = {**base, **own}
                if "methods" in llc and "methods" not in case:
                    case["methods"] = llc["methods"]
            cases.append(case)
        return {**data, "cases": tuple(cases)}


class Resolved(NamedTuple):
    settings: Settings
    points: list


def resolve(s: Settings, raw=None) -> Resolved:
    names = [c.name for c in s.cases]
    if len(set(names)) != len(names):
        raise ConfigError(f"cases: expected distinct names, got {names}")
    cases = []
    for i, c in enumerate(s.cases):
        example = width = None
        if c.model == "two_layer":
            ex = case_example(c.truth, c.truth_options, f"cases[{i}]")
            width = c.width or ex.model.base.width
            if c.at == "truth" and width < ex.truth.width:
                raise ConfigError(f"cases[{i}].width: expected at least the truth's {ex.truth.width} nodes, got {width}")
            if ex.model.num_free != len(ex.model.free) and width != ex.model.base.width:
                raise ConfigError(f"cases[{i}].width: expected the example's (restricted) model width "
                                  f"{ex.model.base.width}, got {width}")
            example, true_lambda = ex, c.true_lambda
        else:
            true_lambda = 0.5 if c.theta0 else 1.0 / (2 * max(c.exponents))
        cases.append(Case(i, c, tuple(c.methods or s.llc.methods), true_lambda, example, width))
    points = [Point(i, {"case": c.settings.name}, c) for i, c in enumerate(cases)]
    cal = s.llc.calibration
    if cal is not None:
        if cal.case not in names:
            raise ConfigError(f"llc.calibration.case: expected one of {names}, got {cal.case!r}")
        points.append(Point(len(cases), {"calibration": cal.case}, cases[names.index(cal.case)]))
    return Resolved(s, points)


def _run_point(points: list, key, s: Settings) -> list[dict]:
    (pt,) = points
    if "calibration" in pt.values:
        return [{"calibration": calibration_result(pt.settings, s.llc, key)}]
    return [case_result(pt.settings, s.llc.n, s.llc.refine, key)]


def _ident(pt: Point, s: Settings, seed: int) -> str:
    import jax

    extra = s.llc.calibration.model_dump() if "calibration" in pt.values else None
    return fingerprint("learning_coefficient", pt.index, pt.settings.settings.model_dump(),
                       list(pt.settings.methods), s.llc.n, s.llc.refine, extra, seed,
                       bool(jax.config.read("jax_enable_x64")), jax.__version__)


def run(r: Resolved, key, ctx):
    from ..posterior.llc_tuning import Calibration

    s = r.settings
    report = run_points(r.points, partial(_run_point, key=key, s=s), ident=partial(_ident, s=s, seed=ctx.seed),
                        checkpoints=ctx.checkpoints, progress=ctx.progress, label="cases", layout=ctx.layout)
    if ctx.layout[0]:                                   # not process 0: its cases are checkpointed, done
        return None
    rows, traces, draws = [], {}, []
    for pt in r.points:
        res = report.results[pt.index]
        if "calibration" in res:
            continue
        rows += res["rows"]
        draws += [(pt.index, k, d) for k, d in enumerate(res.get("draws", []))]
        traces.update(res["arrays"])
    warnings = [f"{row['name']} ({row['method']}): {w}" for row in rows for w in row.get("warnings", [])]
    for row in rows:
        if row["estimate"] is not None and isinstance(row["true_lambda"], (int, float)):
            row["relative_error"] = (row["estimate"] - row["true_lambda"]) / row["true_lambda"]
    metrics = {"n": s.llc.n, "cases": rows, "warnings": warnings}
    metrics["draws"], draw_trees = _draws(s.save_draws, draws)
    grid, cal = None, {"label": "", "true_lambda": None}
    if s.llc.calibration is not None:
        cal = report.results[r.points[-1].index]["calibration"]
        grid = Calibration(**{k: np.asarray(cal[k]) if k not in ("n_beta", "init_loss") else cal[k]
                              for k in Calibration._fields})
        metrics["calibration"] = {"case": cal["label"], "true_lambda": cal["true_lambda"],
                                  "step_sizes": grid.step_sizes, "localizations": grid.localizations,
                                  "estimate": grid.estimate, "se": grid.se, "accept_prob": grid.accept,
                                  "rhat": grid.rhat, "n_beta": grid.n_beta}
    metrics["resumed_cases"] = report.resumed
    metrics["resumed_wall_s"] = report.resumed_wall_s()
    return Output(metrics, dataset(rows, traces, grid, cal["label"], cal["true_lambda"]), draws=draw_trees)


def figures(r: Resolved, ds) -> dict:
    """llc.png (every row but WBIC's), beta_sweep.png (the beta sweeps' rows), calibration.png, from results.nc."""
    from types import SimpleNamespace

    from ..plots import beta_sweep_figure, llc_calibration_figure, llc_cases_figure

    method = ds["method"].values.astype(str)
    out = {"llc": llc_cases_figure(ds.isel(row=np.flatnonzero(method != "wbic")), title="Learning coefficient")}
    if (method == "beta_sweep").any():
        out["beta_sweep"] = beta_sweep_figure(ds.isel(row=np.flatnonzero(method == "beta_sweep")), n=r.settings.llc.n)
    if "calibration_estimate" in ds:
        grid = SimpleNamespace(step_sizes=ds["step_size"].values, localizations=ds["localization"].values,
                               estimate=ds["calibration_estimate"].values, se=ds["calibration_se"].values,
                               accept=ds["calibration_accept_prob"].values,
                               mean_trace=ds["calibration_mean_trace"].values)
        lam = float(ds["calibration_true_lambda"])
        out["calibration"] = llc_calibration_figure(grid, true_lambda=lam if np.isfinite(lam) else None,
                                                    title=f"Calibration: {ds['calibration_case'].values.item()}")
    return out


def _draws(save: bool | None, draws: list) -> tuple[dict, dict]:
    """Each SGLD estimate's loss traces as ArviZ data (slt_relu.arviz_data.llc_tree), draws/case-NN-K.nc,
    when asked or when they take at most 50 MB: (what metrics.json says of them, {name: DataTree})."""
    from ..arviz_data import llc_tree
    from ..posterior.learning_coefficient import LambdaEstimate
    from ..posterior.llc import NO_M, LocalSGLD
    from .posterior_report import SAVE_DRAWS_MB

    mb = sum(np.asarray(d["loss_trace"]).nbytes for _, _, d in draws) / 2**20
    if not draws or save is False or (save is None and mb > SAVE_DRAWS_MB):
        why = ("no SGLD estimates" if not draws else "save_draws = false" if save is False
               else f"about {mb:.0f} MB > {SAVE_DRAWS_MB} MB; set save_draws = true")
        return {"saved": False, "why": why}, {}
    trees = {}
    for index, k, d in draws:                   # the estimate again, from its checkpointed numbers
        nb = float(d["n_beta"])
        est = LambdaEstimate(d["estimate"], d["se"], None, NO_M, "local_sgld", (nb, nb), tuple(d["warnings"]),
                             LocalSGLD(**{f: d[f] for f in LocalSGLD._fields if f in d}))
        trees[f"case-{index:02d}-{k}"] = llc_tree(est, {"case": d["label"]})
    return {"saved": True, "files": [f"draws/{name}.nc" for name in trees], "megabytes": round(mb, 1)}, trees


def memory(s) -> list[Need]:
    """The arrays a run must hold (``slt_relu.workflow.memory``), from its settings."""
    llc = s.llc
    width = max([getattr(c, "width", None) or 1 for c in s.cases])
    D = params(width, 1)
    sg, bs = llc.sgld, llc.beta_sweep
    kept = max(sg.num_steps - sg.num_burnin, 1) // sg.thin
    betas = len(getattr(bs, "factors", ()) or (1,))
    return [Need("llc.n", "the data set", llc.n * 3),
            Need("llc.sgld.num_chains, llc.sgld.num_steps, llc.sgld.thin", "the kept SGLD draws",
                 sg.num_chains * kept * D),
            Need("llc.n, llc.sgld.num_chains", "one forward pass of every chain over the data",
                 sg.num_chains * llc.n * width),
            Need("llc.beta_sweep.chains_per_beta, llc.beta_sweep.num_samples", "the kept draws of the beta sweep",
                 betas * bs.chains_per_beta * bs.num_samples * D)]


def headline(metrics: dict) -> list[str]:
    """lambda_hat of every case and method, with its standard error and the known value."""
    lines = []
    for row in metrics.get("cases", []):
        known = row.get("true_lambda")
        tail = f" (known {known:.4g}, {100 * row['relative_error']:+.0f}%)" if isinstance(known, (int, float)) \
            and row.get("relative_error") is not None else ""
        if row.get("estimate") is not None:
            lines.append(f"{row['name']} ({row['method']}): lambda_hat = {row['estimate']:.3f} +- {row['se']:.3f}{tail}")
        elif row.get("wbic") is not None:
            lines.append(f"{row['name']} (wbic): WBIC = {row['wbic']:.2f} +- {row['wbic_se']:.2f}")
    return lines


# cases are points: the processes of a multi-process run share them
KIND = register_kind(Kind("learning_coefficient", Settings, resolve, run, headline,
                          description=first_line(__doc__), sweeps=True, memory=memory,
                          figures=figures))
