"""Experiment kind ``symmetry``: the phases of W0 for a truth and models of several widths.

For every width: one representative per phase (true_set_representatives), its label, K, the
Fisher rank against D - d and the excess null directions (null_accounting); random compositions
pi . rho applied to every representative must keep its label (classify_phase), K and the Fisher
rank (psi^J moves a point to another phase: the orientation labels of J flip).  Outputs:
true_set_width{d}.png (boundaries with arrows into the active side, DSLT3 style),
effective_weights_width{d}.png (|q_i| w_i, DSLT4 style; n_in = 2), results.nc (one Dataset
along ``representative``, the widths of all of them, ``width`` and ``label`` as coordinates: K, rank,
bound, nullity, generator rank, excess, the label's parts, the checks passed, the flat ``params``
NaN-padded, each node's group and orientation ``node_group``, ``node_orientation`` as classify_phase
gives them: what the figures draw), metrics.json (the per-width summary derived from it).
"""
from __future__ import annotations

from typing import Annotated, Literal, NamedTuple

import numpy as np
from pydantic import Field

from ..fisher import null_accounting
from ..loss import population_loss
from ..network import TwoLayer, num_params, to_flat
from ..classify import classify_phase
from ..phases import check_truth, true_set_representatives
from ..workflow.settings import ConfigError, Section
from ..symmetry import permute, rescale
from ..truths import Example
from ..workflow.kind import Kind, Output, first_line, register_kind
from ..workflow.schemas import TruthExperiment, resolve_setup

__all__ = []   # nothing to import: the kind runs through the registry (slt_relu.kinds.KINDS)


class SymmetrySettings(Section):
    widths: tuple[Annotated[int, Field(ge=1, le=8)], ...] = Field(min_length=1, description="model widths d >= m")
    rtol: float | None = Field(None, ge=0, description="rank threshold of the Fisher spectrum (default D * eps)")
    checks: int = Field(3, ge=0, le=100, description="random compositions pi . rho per representative")
    tol: float = Field(1e-6, ge=0, le=1, description="classify_phase tolerance of those checks")


class Settings(TruthExperiment):
    kind: Literal["symmetry"]
    symmetry: SymmetrySettings


class Resolved(NamedTuple):
    """The [symmetry] settings with the example, inputs and sigma they run on."""

    settings: SymmetrySettings
    example: Example
    inputs: object
    sigma: float


def resolve(s: Settings, raw=None) -> Resolved:
    setup = resolve_setup(s)
    try:
        check_truth(setup.example.truth)
    except ValueError as err:
        raise ConfigError(f"truth: {err}") from None
    m = setup.example.truth.width
    if min(s.symmetry.widths) < m:
        raise ConfigError(f"symmetry.widths: expected a non-empty list of widths between m = {m} (the truth's "
                          f"nodes) and 8, got {list(s.symmetry.widths)}")
    return Resolved(s.symmetry, setup.example, setup.inputs, setup.sigma)


def run(r: Resolved, key, ctx) -> Output:
    import jax
    from tqdm.auto import tqdm

    t, ex, inputs, sigma = r.settings, r.example, r.inputs, r.sigma
    truth = ex.truth
    all_rows = []
    for d in dict.fromkeys(t.widths):
        reps = true_set_representatives(truth, d)
        rows = []
        for k, rep in enumerate(tqdm(reps, desc=f"width {d}", disable=not ctx.progress, leave=False)):
            acc = null_accounting(rep.params, inputs, sigma, t.rtol)
            K = float(population_loss(rep.params, truth, inputs, sigma))
            own = classify_phase(rep.params, truth, tol=t.tol)
            kept = 0
            for c in range(t.checks):
                k1, k2 = jax.random.split(jax.random.fold_in(key, 1000 * d + 10 * k + c))
                lambdas = jax.numpy.exp(jax.random.uniform(k1, (d,), minval=-1.0, maxval=1.0))
                moved = permute(rescale(rep.params, lambdas), np.asarray(jax.random.permutation(k2, d)))
                again = classify_phase(moved, truth, tol=t.tol)
                K2 = float(population_loss(moved, truth, inputs, sigma))
                rank2 = null_accounting(moved, inputs, sigma, t.rtol).rank
                kept += int(again.label == rep.label and abs(K2 - K) <= 1e-12 and rank2 == acc.rank)
            D = num_params(d, truth.n_in)
            rows.append({
                "width": d, "label": str(rep.label), "kind": rep.label.kind, "truth_groups": rep.label.truth,
                "hidden": rep.label.hidden, "degenerate": rep.label.degenerate, "reversed_kinks": rep.r,
                "K": K, "rank": acc.rank, "bound": D - d, "nullity": acc.nullity,
                "generator_rank": acc.generator_rank, "excess": acc.excess,
                "classified_as_itself": own.label == rep.label, "checks_kept": kept,
                "params": np.asarray(to_flat(rep.params)), "_group": own.group, "_orientation": own.orientation,
            })
        all_rows += rows
    ds = _dataset(all_rows, r)
    widths = {str(d): _width_summary(ds, d, [row for row in all_rows if row["width"] == d])
              for d in dict.fromkeys(t.widths)}
    return Output({"truth": ex.name, "widths": widths}, ds)


def figures(r: Resolved, ds) -> dict:
    """Per width true_set_width{d}.png (:func:`slt_relu.plots.phase_gallery_figure`) and, for n_in = 2,
    effective_weights_width{d}.png (:func:`slt_relu.plots.effective_weights_figure`), from the results Dataset:
    each representative's flat ``params``, ``node_group``, ``node_orientation``, K, rank and bound."""
    from ..plots import effective_weights_figure, phase_gallery_figure

    ex, truth = r.example, r.example.truth
    half = getattr(r.inputs, "half_width", getattr(r.inputs, "std", 1.0))
    out = {}
    for d in dict.fromkeys(r.settings.widths):
        rows = _plot_rows(ds.isel(representative=ds["width"].values == d), d, truth.n_in)
        title = (f"{ex.name}: phases of W0 for width {d} ({len(rows)}); colour = truth boundary, dashed = reversed, "
                 "black = hidden group")
        out[f"true_set_width{d}"] = phase_gallery_figure(truth, rows, title=title, half_width=half)
        if truth.n_in == 2:
            out[f"effective_weights_width{d}"] = effective_weights_figure(
                truth, rows, title=f"{ex.name}, width {d}: effective weights |q_i| w_i (grey: truth)")
    return out


def _plot_rows(sub, d: int, n_in: int) -> list[dict]:
    """The figures' rows of the representatives of width d (``sub``): label, params (a TwoLayer of numpy arrays, as
    to_flat flattened them), each node's group and orientation, a note of K and the rank."""
    nw = d * n_in
    rows = []
    for i in range(sub.sizes["representative"]):
        flat, one = sub["params"].values[i], sub.isel(representative=i)
        params = TwoLayer(flat[:nw].reshape(d, n_in), flat[nw:nw + d], flat[nw + d:nw + 2 * d], flat[nw + 2 * d])
        rows.append({"label": str(one["label"].values), "params": params,
                     "group": one["node_group"].values[:d], "orientation": one["node_orientation"].values[:d],
                     "note": f"K={float(one['K']):.0e}  rank {int(one['rank'])}/{int(one['bound'])}"})
    return rows


INT_FIELDS = ("rank", "bound", "nullity", "generator_rank", "excess", "degenerate", "checks_kept")


def _dataset(rows: list, r: Resolved):
    """The representatives of every width as one Dataset along ``representative`` (module docstring)."""
    import xarray as xr

    longest = max(row["params"].size for row in rows)
    params = np.full((len(rows), longest), np.nan)
    for i, row in enumerate(rows):
        params[i, : row["params"].size] = row["params"]
    def padded(field, fill, dtype):
        out = np.full((len(rows), max(row["width"] for row in rows)), fill, dtype)
        for i, row in enumerate(rows):
            out[i, :row["width"]] = row[field]
        return out

    data = {f: ("representative", np.asarray([row[f] for row in rows], np.int64)) for f in INT_FIELDS}
    data |= {
        "K": ("representative", np.asarray([row["K"] for row in rows], np.float64), {"long_name": "K(w)"}),
        "kind": ("representative", [row["kind"] for row in rows]),
        "hidden_groups": ("representative", np.asarray([len(row["hidden"]) for row in rows], np.int64),
                          {"long_name": "groups of nodes on a boundary that is no truth boundary"}),
        "truth_nodes": (("representative", "truth_node", "orientation"),
                        np.asarray([row["truth_groups"] for row in rows], np.int64),
                        {"long_name": "model nodes on each truth boundary, with its orientation and reversed"}),
        "reversed_kinks": (("representative", "truth_node"),
                           np.asarray([np.asarray(row["reversed_kinks"], np.float64) for row in rows])),
        "classified_as_itself": ("representative", np.asarray([row["classified_as_itself"] for row in rows], bool)),
        "node_group": (("representative", "node"), padded("_group", -1, np.int64),
                       {"long_name": "each node's group (classify_phase): truth node j, -1 degenerate, -2 linear, "
                                     "m + k hidden group k; -1 past the width"}),
        "node_orientation": (("representative", "node"), padded("_orientation", np.nan, np.float64),
                             {"long_name": "each node's orientation relative to its group's boundary (+1 / -1, 0 "
                                           "degenerate or linear); NaN past the width"}),
        "params": (("representative", "parameter"), params,
                   {"long_name": "flat parameters (w, b, q, c), NaN past the width's D"}),
    }
    data["checks_kept"] += ({"long_name": "random compositions pi . rho that kept label, K and rank",
                             "checks": r.settings.checks},)
    return xr.Dataset(data, coords={"representative": np.arange(len(rows)),
                                    "width": ("representative", np.asarray([row["width"] for row in rows], np.int64)),
                                    "label": ("representative", [row["label"] for row in rows]),
                                    "orientation": ["same", "reversed"]},
                      attrs={"truth": r.example.name, "sigma": float(r.sigma), "checks": r.settings.checks,
                             "tol": r.settings.tol})


def _width_summary(ds, d: int, rows: list) -> dict:
    """metrics.json's entry of width d: counts and checks read off the Dataset, the representatives' rows."""
    sub = ds.isel(representative=ds["width"].values == d)
    kinds = {}
    for k in sub["kind"].values.tolist():
        kinds[k] = kinds.get(k, 0) + 1
    checks = ds.attrs["checks"]
    return {
        "num_phases": sub.sizes["representative"],
        "num_phases_without_hidden_groups": int((sub["hidden_groups"].values == 0).sum()),
        "by_kind": kinds,
        "max_K": float(sub["K"].values.max()),
        "all_classified_as_themselves": bool(sub["classified_as_itself"].values.all()),
        "representatives": [{k: v for k, v in row.items()
                             if k not in ("params", "_group", "_orientation", "width", "checks_kept")}
                            | {"symmetry_checks_passed": f"{n}/{checks}"}
                            for row, n in zip(rows, sub["checks_kept"].values.tolist())],
    }


def headline(metrics: dict) -> list[str]:
    """Phases of W0 per width, the largest K over the representatives, whether each is classified as itself."""
    return [f"width {w}: {v['num_phases']} phases ({v['num_phases_without_hidden_groups']} without hidden groups), "
            f"max K {v['max_K']:.2g}, all classified as themselves: {v['all_classified_as_themselves']}"
            for w, v in metrics.get("widths", {}).items()]


KIND = register_kind(Kind("symmetry", Settings, resolve, run, headline,
                          description=first_line(__doc__), figures=figures))
