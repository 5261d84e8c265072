"""Experiment kind ``fisher``: rank, spectrum and null-direction accounting of I(w) at sets of points.

Inputs: [inputs], or a [truth] whose inputs are used (and sigma).  Each [[fisher.points]] group
names its ``source`` (below) and may carry its own [fisher.points.inputs].  With source =
"random" and placement = "iid" on a bounded box, a node whose boundary misses the box is
inactive or fully active there and adds excess directions (counted by hand in
``slt_relu.degenerate.box_excess_count``); "crossing" puts every boundary through the central half of the box.
"degenerate" makes node 0 of a generic network degenerate in the named ways of
``slt_relu.degenerate.excess_counts`` and checks the excess against the hand count.

Outputs: rank_vs_bound.png, spectrum.png, results.nc (one Dataset along ``point``, its ``label`` and
``group`` as coordinates: ``spectrum`` and flat ``params``, NaN-padded to the longest, and rank, bound,
nullity, generator rank, excess, the hand count, rtol per point), metrics.json (the per-group summary
derived from it).
"""
from __future__ import annotations

from typing import Annotated, Literal, NamedTuple, Union

import numpy as np
from pydantic import Field

from ..degenerate import (BOX_CASES, DEGENERATE_CASES, box_excess_count, excess_counts, generic_crossing_params,
                          make_degenerate)
from ..fisher import default_rtol, null_accounting
from ..inputs import UniformBox
from ..network import from_flat, init_params, num_params, to_flat
from ..workflow.settings import SCALE_BOUND, ConfigError, Section
from ..truths import Example, m_symmetric
from ..workflow.kind import Kind, Output, first_line, register_kind
from ..workflow.memory import Need, quadrature_points, truth_size, width_keys
from ..workflow.schemas import Experiment, InputsSettings, TruthSettings, example_of, resolve_inputs

__all__ = []   # nothing to import: the kind runs through the registry (slt_relu.kinds.KINDS)

Width = Annotated[int, Field(ge=1, le=256)]


class _Group(Section):
    label: str | None = Field(None, description="the group's name in plots and metrics (default: its source)")
    inputs: InputsSettings | None = Field(None, description="this group's own input distribution")


class RandomPoints(_Group):
    source: Literal["random"]
    widths: tuple[Width, ...] = Field(min_length=1, description="network widths")
    count: int = Field(4, ge=1, description="networks per width")
    scale: float = Field(1.0, gt=0, le=SCALE_BOUND, description="every coordinate N(0, scale^2) (placement = \"iid\")")
    placement: Literal["iid", "crossing"] = Field("iid", description="i.i.d. coordinates, or every boundary "
                                                  "through the central half of the box / one std of the origin")


class MSymmetricPoints(_Group):
    source: Literal["m_symmetric"]
    m: tuple[Width, ...] = Field(min_length=1, description="the m-symmetric truths")
    bias: float = Field(-0.3, ge=-SCALE_BOUND, le=SCALE_BOUND, description="their bias")
    q: float = Field(1.0, ge=-SCALE_BOUND, le=SCALE_BOUND, description="their output weight")


class TruthPoint(_Group):
    source: Literal["truth"]


class TrueSetPoints(_Group):
    source: Literal["true_set"]
    count: int = Field(11, ge=2, description="points along the [truth] example's W0")
    x_range: tuple[float, float] = Field((-2.0, 2.0), description="box of the first free coordinate")
    y_range: tuple[float, float] = Field((-2.0, 2.0), description="box of the second free coordinate")


class DegeneratePoints(_Group):
    source: Literal["degenerate"]
    width: int = Field(ge=2, le=256, description="network width")
    cases: tuple[Literal[tuple(DEGENERATE_CASES)], ...] = Field(min_length=1, description="ways node 0 degenerates")


class PathPoints(_Group):
    source: Literal["path"]
    width: Width = Field(description="network width")
    start: tuple[float, ...] = Field(description="flat parameters (length D) at the start")
    end: tuple[float, ...] = Field(description="flat parameters at the end")
    steps: int = Field(11, ge=2, description="points on the segment")


class ListedPoints(_Group):
    source: Literal["points"]
    width: Width = Field(description="network width")
    params: tuple[tuple[float, ...], ...] = Field(min_length=1, description="flat parameter lists")


PointGroup = Annotated[Union[RandomPoints, MSymmetricPoints, TruthPoint, TrueSetPoints, DegeneratePoints, PathPoints,
                             ListedPoints], Field(discriminator="source")]


class FisherSettings(Section):
    rtol: float | None = Field(None, ge=0, description="rank threshold (default D * eps)")
    points: tuple[PointGroup, ...] = Field(min_length=1, description="groups of points ([[fisher.points]])")


class Settings(Experiment):
    kind: Literal["fisher"]
    truth: TruthSettings | None = None
    inputs: InputsSettings | None = None
    sigma: float | None = Field(None, gt=0, le=SCALE_BOUND, description="noise standard deviation (default: the example's, or 1)")
    fisher: FisherSettings


class Group(NamedTuple):
    """A [[fisher.points]] group: its settings, its label, the inputs it runs on (its own or the
    config's) and, for source = "true_set", the box W0 is drawn in."""

    settings: PointGroup
    label: str
    inputs: object
    box: tuple | None = None


class Resolved(NamedTuple):
    """The [fisher] settings, the [truth] example (None without one), the inputs, sigma and the groups."""

    settings: FisherSettings
    example: Example | None
    inputs: object
    sigma: float
    groups: tuple[Group, ...]


def resolve(s: Settings, raw=None) -> Resolved:
    example = example_of(s.truth) if s.truth is not None else None
    if s.inputs is not None:
        inputs = resolve_inputs(s.inputs, example.truth.n_in if example else None)
    elif example is not None:
        inputs = example.inputs
    else:
        raise ConfigError("inputs: missing; expected an [inputs] table (no [truth] gives a default)")
    sigma = s.sigma if s.sigma is not None else (example.sigma if example else 1.0)
    groups = []
    for i, p in enumerate(s.fisher.points):
        key = f"fisher.points[{i}]"
        g_inputs = resolve_inputs(p.inputs, inputs.n_in) if p.inputs is not None else inputs
        box = None
        src = p.source
        if src == "m_symmetric" and g_inputs.n_in != 2:
            raise ConfigError(f"{key}.source: expected an input dimension of 2 for m-symmetric truths, got {src!r}")
        if src in ("truth", "true_set") and example is None:
            raise ConfigError(f"{key}.source: expected a [truth] table for source = {src!r}")
        if src == "true_set":
            if example.true_set is None:
                raise ConfigError(f"{key}.source: expected an example with a known W0 (not {example.name})")
            box = (p.x_range, p.y_range)
        if src == "degenerate":
            for case in p.cases:
                if case in BOX_CASES and not isinstance(g_inputs, UniformBox):
                    raise ConfigError(f"{key}.cases: expected uniform inputs for {case!r} (a Gaussian has no box), "
                                      f"got {list(p.cases)}")
        vectors = {"path": lambda: {"start": p.start, "end": p.end},
                   "points": lambda: {f"params[{j}]": v for j, v in enumerate(p.params)}}.get(src, dict)()
        for name, vec in vectors.items():
            D = num_params(p.width, g_inputs.n_in)
            if len(vec) != D:
                raise ConfigError(f"{key}.{name}: expected {D} numbers (D for width {p.width}, "
                                  f"n_in {g_inputs.n_in}), got {len(vec)}")
        groups.append(Group(p, p.label or p.source, g_inputs, box))
    return Resolved(s.fisher, example, inputs, sigma, tuple(groups))


def _points(g: Group, r: Resolved, key):
    """Yield (label, params, free mask or None, expected_excess or None) for one group."""
    import jax

    ex, inputs, p = r.example, g.inputs, g.settings
    dtype = jax.numpy.zeros(()).dtype
    src = p.source
    if src == "random":
        for width in p.widths:
            for i, k in enumerate(jax.random.split(jax.random.fold_in(key, width), p.count)):
                if p.placement == "iid":
                    params = init_params(k, width, inputs.n_in, p.scale, dtype)
                    expected = box_excess_count(params, inputs.half_width) if isinstance(inputs, UniformBox) else None
                else:
                    half = inputs.half_width if isinstance(inputs, UniformBox) else inputs.std
                    params = generic_crossing_params(k, width, inputs.n_in, half, dtype)
                    expected = 0
                yield f"random d={width} #{i}", params, None, expected
    elif src == "m_symmetric":
        for m in p.m:
            yield f"{m}-symmetric", m_symmetric(m, p.bias, p.q), None, 0
    elif src == "truth":
        yield ex.name, ex.model.base, ex.model.free, None
    elif src == "true_set":
        curve = np.concatenate(ex.true_set(g.box, 400))
        for i, th in enumerate(curve[np.linspace(0, len(curve) - 1, p.count).astype(int)]):
            yield f"W0 #{i} {np.round(th, 3).tolist()}", ex.model.embed(th), ex.model.free, 0
    elif src == "degenerate":
        counts = excess_counts(inputs.n_in)
        for case in p.cases:
            half = inputs.half_width if isinstance(inputs, UniformBox) else 1.0
            base = generic_crossing_params(jax.random.fold_in(key, DEGENERATE_CASES.index(case)), p.width,
                                           inputs.n_in, half, dtype)
            yield case, make_degenerate(case, base, inputs), None, counts[case]
    elif src == "path":
        start, end = np.array(p.start), np.array(p.end)
        for tau in np.linspace(0, 1, p.steps):
            yield f"path t={tau:.2f}", from_flat((1 - tau) * start + tau * end, p.width, inputs.n_in), None, None
    elif src == "points":
        for i, vec in enumerate(p.params):
            yield f"point {i}", from_flat(np.array(vec), p.width, inputs.n_in), None, None


def _max_finite(values) -> float | None:
    """Largest |I v_i| over the generators inside the (restricted) model; None if there are none."""
    finite = np.asarray(values)[np.isfinite(values)]
    return float(finite.max()) if finite.size else None


def _padded(arrays) -> np.ndarray:
    """Rows of different lengths as one (rows, longest) float array, NaN-padded."""
    arrays = [np.asarray(a) for a in arrays]
    dtype = np.result_type(np.float32, *(a.dtype for a in arrays))
    out = np.full((len(arrays), max(a.size for a in arrays)), np.nan, dtype)
    for i, a in enumerate(arrays):
        out[i, : a.size] = a
    return out


INT_FIELDS = ("width", "D", "bound", "rank", "nullity", "generator_rank", "excess")


def dataset(rows: list, sigma: float):
    """The points' numbers as one Dataset along ``point`` (module docstring); None -> NaN."""
    import xarray as xr

    nan = lambda v: np.nan if v is None else v
    data = {"spectrum": (("point", "eigenvalue"), _padded([r["spectrum"] for r in rows]),
                         {"long_name": "eigenvalues of I(w), NaN past the point's number of coordinates"}),
            "params": (("point", "parameter"), _padded([r["params"] for r in rows]),
                       {"long_name": "flat parameters (w, b, q, c), NaN past the point's D"})}
    data |= {f: ("point", np.asarray([r[f] for r in rows], np.int64)) for f in INT_FIELDS}
    data |= {f: ("point", np.asarray([nan(r[f]) for r in rows], np.float64))
             for f in ("expected_excess", "max_generator_residual", "rtol")}
    data["expected_excess"] += ({"long_name": "hand count of the excess null directions (NaN: none)"},)
    return xr.Dataset(data, coords={"point": np.arange(len(rows)), "label": ("point", [r["label"] for r in rows]),
                                    "group": ("point", [r["group"] for r in rows])},
                      attrs={"sigma": float(sigma)})


def _summary(ds) -> dict:
    """Per group: its number of points, the fraction at the bound, the fraction matching the hand count."""
    summary = {}
    groups = ds["group"].values
    for g in dict.fromkeys(groups.tolist()):
        sel = groups == g
        expected, excess = ds.expected_excess.values[sel], ds.excess.values[sel]
        checked = ~np.isnan(expected)
        summary[g] = {
            "points": int(sel.sum()),
            "fraction_at_bound": float(np.mean(ds["rank"].values[sel] == ds.bound.values[sel])),
            "matches_hand_count": float(np.mean(excess[checked] == expected[checked])) if checked.any() else None,
        }
    return summary


def run(r: Resolved, key, ctx) -> Output:
    import jax
    from tqdm.auto import tqdm

    rtol = r.settings.rtol
    rows, todo = [], []
    for gi, g in enumerate(r.groups):
        todo += [(gi, g.label, g.inputs, *pt) for pt in _points(g, r, jax.random.fold_in(key, gi))]
    for gi, group, inputs, label, params, free, expected in tqdm(todo, desc="fisher", disable=not ctx.progress,
                                                                 leave=False):
        try:
            acc = null_accounting(params, inputs, r.sigma, rtol, free=free)
        except ValueError as err:
            raise ConfigError(f"fisher.points[{gi}] ({label}): {err}") from None
        D, d = acc.num_params, params.width
        rows.append({
            "group": group, "label": label, "width": d, "D": D,
            "bound": D - d if free is None else D - acc.generator_rank,
            "rank": acc.rank, "nullity": acc.nullity, "generator_rank": acc.generator_rank,
            "excess": acc.excess, "expected_excess": expected,
            "max_generator_residual": _max_finite(acc.generator_residuals),
            "rtol": rtol if rtol is not None else default_rtol(D, acc.spectrum.dtype),
            "spectrum": acc.spectrum, "params": to_flat(params),
        })
    ds = dataset(rows, r.sigma)
    public = [{k: v for k, v in row.items() if k not in ("spectrum", "params")} for row in rows]
    return Output({"summary": _summary(ds), "points": public}, ds)


def figures(r: Resolved, ds) -> dict:
    """rank_vs_bound.png and spectrum.png (:func:`slt_relu.plots.rank_vs_bound_figure`,
    :func:`slt_relu.plots.spectrum_figure`), from the results Dataset."""
    from ..plots import rank_vs_bound_figure, spectrum_figure

    return {"rank_vs_bound": rank_vs_bound_figure(ds), "spectrum": spectrum_figure(ds)}


def memory(s) -> list[Need]:
    """The arrays a run must hold (``slt_relu.workflow.memory``), from its settings."""
    out = []
    width, n_in = truth_size(s)
    for i, group in enumerate(s.fisher.points):
        widths = list(getattr(group, "widths", None) or [getattr(group, "width", None) or width])
        D = num_params(max(widths), n_in)
        out.append(Need(f"fisher.points[{i}]" + width_keys(s), f"a {D} x {D} Fisher matrix", D * D))
        if quadrature_points(s):
            out.append(Need(f"fisher.points[{i}], inputs.cells", "the Jacobian at the quadrature points",
                            quadrature_points(s) * D))
    return out


def headline(metrics: dict) -> list[str]:
    """Per group of points: how many, the fraction at the bound D - d, the fraction matching the hand count."""
    return [f"{group}: {v['points']} points, at D - d {100 * v['fraction_at_bound']:.0f}%, excess = hand count "
            f"{100 * v['matches_hand_count']:.0f}%" for group, v in metrics.get("summary", {}).items()]


KIND = register_kind(Kind("fisher", Settings, resolve, run, headline,
                          description=first_line(__doc__), memory=memory, figures=figures))
