"""Every figure the shipped kinds draw has a clean layout, checked from matplotlib's own layout after
``fig.canvas.draw()`` (display coordinates of the drawn artists, not pixels):

- no legend covers plotted data (lines and their segments, markers, scatter points, error bars,
  contours, filled areas, bars, spans, images and meshes, annotations) of any axes it overlaps, nor
  another axes;
- no two titles (axes titles, the figure's title, figure texts) or legends overlap, and no title
  runs into another axes;
- every axes showing data names its x and y axes (3-D: also z), or shares that axis with a panel
  that names it;
- the tick labels of an axis do not run into each other, and no axis' labels run into another axes;
- titles, labels and legends lie inside the figure.

Which figures: the figure functions of ``slt_relu.plots`` are called the way the shipped kinds call
them (``FIGURES``, one case per figure of each kind, on small synthetic arrays with the kinds'
shapes, labels and titles).  Two guards keep this list complete: every public ``*_figure`` function
of ``slt_relu.plots`` has a case, and a kind's real run at small settings (the cheap kinds) must draw
only figures that have a case under the same kind (``test_kind_runs_draw_only_listed_figures``); the
figures of those real runs are checked too.  Running every shipped config here would take minutes
(each posterior sweep compiles its samplers), which the tiny runs of ``test_reference.py`` already spend.
"""
from __future__ import annotations

import itertools
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import Collection, LineCollection, QuadMesh
from matplotlib.contour import ContourSet
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Annotation
from matplotlib.transforms import Bbox

ROOT = Path(__file__).resolve().parent.parent
PAD = 0.5              # display units (pixels at the figure's dpi) two boxes may touch by


# ----------------------------------------------------------------------------------------------
# the checks


def _draw(fig):
    """Draw fig as save_figure does (laid out twice) and return the renderer."""
    from slt_relu.plots._style import settle

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    settle(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _shrunk(bbox: Bbox, pad: float = PAD) -> Bbox:
    return Bbox.from_extents(bbox.x0 + pad, bbox.y0 + pad, bbox.x1 - pad, bbox.y1 - pad)


def _meet(a: Bbox, b: Bbox, pad: float = PAD) -> bool:
    """Whether a and b overlap by more than pad on both axes."""
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > pad) and (min(a.y1, b.y1) - max(a.y0, b.y0) > pad)


def _within(inner: Bbox, outer: Bbox, pad: float = 1.0) -> bool:
    return (inner.x0 >= outer.x0 - pad and inner.y0 >= outer.y0 - pad and inner.x1 <= outer.x1 + pad
            and inner.y1 <= outer.y1 + pad)


def _is_colorbar(ax) -> bool:
    return hasattr(ax, "_colorbar")


def _is_3d(ax) -> bool:
    return getattr(ax, "name", "") == "3d"


def _data_artists(ax):
    """The artists of ax that show data."""
    arts = [a for a in itertools.chain(ax.lines, ax.collections, ax.images, ax.patches) if a.get_visible()]
    return [a for a in arts if not (isinstance(a, Line2D) and len(a.get_xydata()) == 0)]


def _has_data(ax) -> bool:
    return ax.get_visible() and ax.axison and not _is_colorbar(ax) and bool(_data_artists(ax))


def _region(artist, box: Bbox, ax) -> Bbox | None:
    """box cut to what artist can show (its clip box, normally ax's area); None when empty."""
    if artist.get_clip_on() and artist.get_clip_box() is not None:
        clip = artist.get_clip_box()
        x0, y0 = max(box.x0, clip.x0), max(box.y0, clip.y0)
        x1, y1 = min(box.x1, clip.x1), min(box.y1, clip.y1)
        if x1 - x0 <= 0 or y1 - y0 <= 0:
            return None
        return Bbox.from_extents(x0, y0, x1, y1)
    return box


def _points_in(points, box: Bbox) -> bool:
    points = np.asarray(points, float).reshape(-1, 2)
    points = points[np.all(np.isfinite(points), axis=1)]
    return bool(np.any((points[:, 0] > box.x0) & (points[:, 0] < box.x1) & (points[:, 1] > box.y0)
                       & (points[:, 1] < box.y1)))


def _path_hits(path, transform, box: Bbox, filled: bool) -> bool:
    disp = transform.transform_path(path)
    if len(disp.vertices) == 0:
        return False
    if _points_in(disp.vertices, box):
        return True
    return bool(disp.intersects_bbox(box, filled=filled))


def _covers(artist, box: Bbox) -> bool:
    """Whether artist draws anything inside box (display coordinates)."""
    if isinstance(artist, Line2D):
        xy = artist.get_transform().transform(artist.get_xydata())
        xy = xy[np.all(np.isfinite(xy), axis=1)]
        if _points_in(xy, box):
            return True
        if artist.get_linestyle() not in ("None", "none", "", " ") and len(xy) > 1:
            from matplotlib.path import Path as MPath
            return bool(MPath(xy).intersects_bbox(box, filled=False))
        return False
    if isinstance(artist, (QuadMesh, AxesImage)):
        return _meet(artist.get_window_extent(), box, 0.0)
    if isinstance(artist, Collection):
        if type(artist).__name__ in ("PathCollection", "Path3DCollection"):        # scatter: its points
            return _points_in(artist.get_offset_transform().transform(artist.get_offsets()), box)
        if isinstance(artist, ContourSet):
            filled = bool(artist.filled)
        else:
            filled = not isinstance(artist, LineCollection) and len(artist.get_facecolor()) > 0
        return any(_path_hits(p, artist.get_transform(), box, filled) for p in artist.get_paths())
    if isinstance(artist, Patch):
        return _path_hits(artist.get_path(), artist.get_transform(), box, artist.get_fill())
    if isinstance(artist, Annotation):
        if artist.get_text() and _meet(artist.get_window_extent(), box, 0.0):
            return True
        arrow = artist.arrow_patch
        return arrow is not None and arrow.get_visible() and _meet(arrow.get_window_extent(), box, 0.0)
    return False


def _legends(fig):
    out = [(leg, ax) for ax in fig.axes if (leg := ax.get_legend()) is not None and leg.get_visible()]
    return out + [(leg, None) for leg in fig.legends if leg.get_visible()]


def _titles(fig):
    """(name, Text) of every non-empty title: axes titles, the figure's title, figure texts."""
    out = []
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        for side, text in (("", ax.title), ("left ", ax._left_title), ("right ", ax._right_title)):
            if text.get_visible() and text.get_text().strip():
                out.append((f"axes {k} {side}title {text.get_text()!r}", text, ax))
    if fig._suptitle is not None and fig._suptitle.get_text().strip():
        out.append((f"suptitle {fig._suptitle.get_text()!r}", fig._suptitle, None))
    for text in fig.texts:
        if text is fig._suptitle or text is fig._supxlabel or text is fig._supylabel:
            continue
        if text.get_visible() and text.get_text().strip():
            out.append((f"figure text {text.get_text()!r}", text, None))
    return out


def _short(text: str, n: int = 50) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= n else text[:n - 3] + "..."


def _drawn_ticklabels(axis):
    """The tick labels axis draws (major and minor, within its view), with their text."""
    out = []
    for tick in axis._update_ticks():
        for lab in (tick.label1, tick.label2):
            if lab.get_visible() and lab.get_text().strip():
                out.append(lab)
    return out


def layout_problems(fig) -> list[str]:
    """What is wrong with fig's layout (module docstring), one line each; [] when nothing."""
    renderer = _draw(fig)
    problems = []
    fig_box = fig.bbox
    axes = [ax for ax in fig.axes if ax.get_visible()]
    boxes = {ax: ax.get_window_extent(renderer) for ax in axes}
    name = {ax: f"axes {k}" + (" (colorbar)" if _is_colorbar(ax) else "") for k, ax in enumerate(fig.axes)}

    def inside(what: str, box: Bbox):
        if not _within(box, fig_box):
            problems.append(f"{what} is cut off by the figure's edge")

    # legends: no data under them, no other axes under them
    legends = _legends(fig)
    for leg, host in legends:
        box = leg.get_window_extent(renderer)
        where = f"legend of {name[host]}" if host is not None else "figure legend"
        inside(where, box)
        for ax in axes:
            if ax is not host and _meet(boxes[ax], box):
                problems.append(f"{where} overlaps {name[ax]}")
            if not (ax is host or _meet(boxes[ax], box)):
                continue
            for art in _data_artists(ax) + [t for t in ax.texts if isinstance(t, Annotation)]:
                region = _region(art, _shrunk(box), ax)
                if region is not None and _covers(art, region):
                    problems.append(f"{where} covers data of {name[ax]} ({type(art).__name__} "
                                    f"{_short(str(art.get_label()), 30)!r})")
                    break

    # titles and legends: pairwise apart; titles off other axes; inside the figure
    titles = _titles(fig)
    boxed = [(what, text.get_window_extent(renderer), ax) for what, text, ax in titles]
    boxed += [(("legend of " + name[h]) if h is not None else "figure legend", leg.get_window_extent(renderer), h)
              for leg, h in legends]
    for (wa, ba, _), (wb, bb, _) in itertools.combinations(boxed, 2):
        if _meet(ba, bb):
            problems.append(f"{_short(wa)} overlaps {_short(wb)}")
    for what, box, own in boxed[:len(titles)]:
        inside(_short(what), box)
        for ax in axes:
            if ax is not own and _meet(boxes[ax], box):
                problems.append(f"{_short(what)} runs into {name[ax]}")

    # axis labels on every axes with data (or on an axes it shares that axis with)
    for ax in axes:
        if not _has_data(ax):
            continue
        pairs = [("x", ax.get_xlabel, ax.get_shared_x_axes()), ("y", ax.get_ylabel, ax.get_shared_y_axes())]
        if _is_3d(ax):
            pairs.append(("z", ax.get_zlabel, None))
        for letter, get, shared in pairs:
            if get().strip():
                continue
            siblings = shared.get_siblings(ax) if shared is not None else []
            if not any(getattr(s, f"get_{letter}label")().strip() for s in siblings if s is not ax):
                problems.append(f"{name[ax]} ({_short(ax.get_title() or '', 30)!r}) has data but no {letter} label")

    # tick labels: apart within an axis; no axis text runs into another axes or another axes' texts;
    # inside the figure
    decorations = []                                   # (axes, what, box) of every tick label and axis label
    for ax in axes:
        if not ax.axison:
            continue
        for axis in [ax.xaxis, ax.yaxis] + ([ax.zaxis] if _is_3d(ax) else []):
            lboxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _drawn_ticklabels(axis)]
            for (ta, ba), (tb, bb) in itertools.combinations(lboxes, 2):
                if _meet(ba, bb):
                    problems.append(f"{name[ax]}: tick labels {ta!r} and {tb!r} overlap")
                    break
            texts = lboxes + ([(axis.label.get_text(), axis.label.get_window_extent(renderer))]
                              if axis.label.get_visible() and axis.label.get_text().strip() else [])
            for text, box in texts:
                inside(f"{name[ax]}: {_short(text, 30)!r}", box)
                decorations.append((ax, text, box))
                for other in axes:
                    if other is not ax and not _is_3d(other) and _meet(boxes[other], box) \
                            and not (_is_colorbar(other) and _is_colorbar(ax)):
                        problems.append(f"{name[ax]}: {_short(text, 30)!r} runs into {name[other]}")
                        break
    if decorations:
        ext = np.array([[b.x0, b.y0, b.x1, b.y1] for _, _, b in decorations])
        owner = np.array([id(ax) for ax, _, _ in decorations])
        dx = np.minimum(ext[:, None, 2], ext[None, :, 2]) - np.maximum(ext[:, None, 0], ext[None, :, 0])
        dy = np.minimum(ext[:, None, 3], ext[None, :, 3]) - np.maximum(ext[:, None, 1], ext[None, :, 1])
        clash = (dx > PAD) & (dy > PAD) & (owner[:, None] != owner[None, :])
        for i, j in zip(*np.nonzero(np.triu(clash))):
            (a, ta, _), (b, tb, _) = decorations[i], decorations[j]
            problems.append(f"{name[a]}: {_short(ta, 30)!r} runs into {name[b]}'s {_short(tb, 30)!r}")
    return list(dict.fromkeys(problems))


def test_a_legend_over_a_line_is_found():
    """The check fails a figure with a legend at the centre of a line through it."""
    from slt_relu.plots._style import subplots

    fig, ax = subplots(figsize=(4, 3))
    x = np.linspace(0, 1, 50)
    ax.plot(x, 0.5 + 0 * x, label="a flat line through the middle")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend(loc="center")
    assert any("covers data" in p for p in layout_problems(fig))


# ----------------------------------------------------------------------------------------------
# the figures of the shipped kinds: each case calls a figure function the way its kind does, with
# arrays of the shapes (sizes as in the shipped configs, where drawing them is cheap) and the labels
# and titles the kind gives it.  FIGURES[kind] = {"config/figure": build}; "figure" is the name the
# kind saves it under (digits of a width dropped).


def _rng():
    return np.random.default_rng(0)


def _landscape(markers: bool):
    from slt_relu.plots import landscape_figure

    xs, ys = np.linspace(-1, 2, 31), np.linspace(-1, 2, 31)
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    Z = (X + Y - 1) ** 2 * (1 + X ** 2)
    s = np.linspace(0, 1, 21)
    curve = np.stack([s, 1 - s], 1)
    marks = {"degenerate (1, 0)": (1.0, 0.0), "degenerate (0, 1)": (0.0, 1.0),
             "non-degenerate (1/2, 1/2)": (0.5, 0.5)} if markers else None
    title = ("DSLT3 Example 3.4: relu(w1 x) + relu(w2 x) vs relu(x); W0 = {w1 + w2 = 1, w >= 0}\n"
             "K(w) over (w[0,0], w[1,0])")
    along = [("mass across the valley, n*beta = 100", s, 0.12 + 0.03 * (s - 0.5) ** 2, "int exp(-n beta L) dt"),
             ("Fisher rank of the restricted model (2 free)", s, np.ones_like(s), "rank")]
    return landscape_figure(xs, ys, Z, xlabel="w[0,0]", ylabel="w[1,0]", title=title, curves=[curve], markers=marks,
                            along=along)


# the network_landscape configs: (the network's line, D, grid points, line points, top eigenvalues, the loss's name,
# directions, the slice's MLP widths (None: no regions), anchors)
NETWORK_LANDSCAPE = {
    "network_landscape_truth": ("dslt4_pt1 truth's network, width 3 (13 parameters), n = 10000", 13, 101, 401, 6,
                                "L_n(w), n = 10000", "hessian", (2, 3, 1), False),
    "network_landscape_digits": ("digits MLP 64-64-10 (4810 parameters), 1000 Adam steps", 4810, 51, 201, 10,
                                 "cross-entropy on the training digits", "random", (64, 64, 10), True),
    "network_landscape_tms": ("toy model of superposition, c = 6, at its 6-gon (18 parameters)", 18, 101, 401, 6,
                              "L(w), exact", "random", None, False),
}


def _network_landscape(config: str, which: str):
    """network_landscape's figures of made-up numbers with each config's sizes, names and slices (a random MLP of the
    config's widths on its input slice), through the kind's Dataset layout as a run writes it."""
    import xarray as xr

    from slt_relu.kinds.network_landscape import with_regions
    from slt_relu.kinds.network_landscape_networks import Network
    from slt_relu.mlp import init_mlp
    from slt_relu.plots import hessian_density_figure, input_regions_figure, loss_surface_figure

    network, D, R, L, k, loss_name, directions, widths, anchors = NETWORK_LANDSCAPE[config]
    rng, xs, ts = _rng(), np.linspace(-1, 1, R), np.linspace(-1, 1, L)
    S, T = np.meshgrid(xs, xs, indexing="ij")
    grow = 30.0 if "tms" in config else 1.0                          # a loss that spans decades (log levels)
    Z = 0.05 + grow * (0.7 * S ** 2 + 0.2 * T ** 2 + 0.3 * S * T) ** 1.5 + 0.1 * S ** 3
    lines = np.stack([0.05 + grow * 0.6 * np.abs(ts) ** 3, 0.05 + grow * 0.1 * ts ** 2])
    nodes = np.sort(np.concatenate([rng.normal(0, 0.01, (5, k + 10)), rng.uniform(0, 1.3, (5, 5))], 1), axis=1)
    weights = rng.dirichlet(np.ones(nodes.shape[1]), size=5)
    grid = np.linspace(nodes.min() - 0.07, nodes.max() + 0.07, 1001)
    density = np.sum(weights[None] * np.exp(-0.5 * ((grid[:, None, None] - nodes[None]) / 0.013) ** 2), (1, 2))
    ds = xr.Dataset(
        {"loss": (("x", "y"), Z, {"long_name": loss_name}), "line_loss": (("direction", "t"), lines),
         "eigenvalue": ("k", np.sort(rng.uniform(0.1, 1.3, k))[::-1]), "trace": ((), 5.6), "trace_se": ((), 0.27),
         "density": ("eigenvalue_grid", density / (density.sum() * (grid[1] - grid[0])), {"sigma": 0.013}),
         "slq_node": (("probe", "slq_step"), nodes), "slq_weight": (("probe", "slq_step"), weights),
         "point": ("parameter", rng.normal(size=D))},
        coords={"x": xs, "y": xs, "t": ts, "direction": ["u", "v"], "k": np.arange(1, k + 1), "eigenvalue_grid": grid,
                "parameter": np.arange(D)},
        attrs={"network": network, "directions": directions, "range": 1.0})
    if which == "landscape":
        return loss_surface_figure(ds)
    if which == "hessian_density":
        return hessian_density_figure(ds)
    import jax

    mlp = init_mlp(jax.random.PRNGKey(0), widths, bias_std=0.3)
    if anchors:
        images = rng.uniform(0, 1, (3, widths[0]))
        plane = (images.mean(0), images[1] - images[0], images[2] - images[0], 1.0,
                 np.array([[-1.0, -1.0], [2.0, -1.0], [-1.0, 2.0]]) / 3, [f"training image {i} (digit {d})" for i, d in
                                                                            ((26, 0), (33, 1), (0, 2))],
                 ("s (along image 33 - image 26)", "t (along image 0 - image 26)"))
    else:
        plane = (np.zeros(2), np.eye(2)[0], np.eye(2)[1], 1.0, np.zeros((0, 2)), [], ("x1", "x2"))
    return input_regions_figure(with_regions(ds, Network(None, None, None, None, network, loss_name, {}, mlp, plane)))


GROUPS = ["random, Gaussian inputs", "m-symmetric truths", "degenerate, Gaussian inputs", "degenerate on the box",
          "random iid N(0,1), uniform box [-1,1]^2"]


CASES_BY_GROUP = {2: ["q_zero", "w_zero_b_positive", "dead_node", "shared_boundary"],
                  3: ["inactive_on_box", "active_on_box"]}


def _fisher_rows():
    """Points of fisher_rank_survey's five groups (widths 1..16 x 3, m = 2..8, the degenerate cases,
    widths 2..16 x 3 on the box), excess null directions where the survey finds them."""
    rng, rows = _rng(), []
    points = ([(0, d, f"random d={d} #{k}") for d in range(1, 17) for k in range(3)]
              + [(1, m, f"{m}-symmetric") for m in range(2, 9)]
              + [(g, 4, case) for g, cases in CASES_BY_GROUP.items() for case in cases]
              + [(4, d, f"random d={d} #{k}") for d in (2, 4, 8, 16) for k in range(3)])
    for g, d, label in points:
        D = 4 * d + 1
        bound = D - d
        excess = int(rng.integers(1, 4)) if g >= 2 else 0
        rank = bound - excess
        spec = np.concatenate([np.geomspace(1, 1e-4, rank), np.full(D - rank, 1e-20)])
        rows.append({"group": GROUPS[g], "label": label, "D": D, "bound": bound, "rank": rank, "excess": excess,
                     "expected_excess": excess, "spectrum": spec, "rtol": D * 2.2e-16})
    return rows


def _fisher(which):
    """The fisher kind's figure of made-up rows, through the kind's results Dataset as a run draws it."""
    from slt_relu.kinds.fisher_kind import dataset
    from slt_relu.plots import rank_vs_bound_figure, spectrum_figure

    rows = [row | {"width": (row["D"] - 1) // 4, "nullity": row["D"] - row["rank"], "generator_rank": 0,
                   "max_generator_residual": None, "params": np.zeros(row["D"])} for row in _fisher_rows()]
    return (rank_vs_bound_figure if which == "rank_vs_bound" else spectrum_figure)(dataset(rows, 1.0))


def _two_layer(w, b, q):
    return SimpleNamespace(w=np.asarray(w, float), b=np.asarray(b, float), q=np.asarray(q, float))


def _symmetry_rows(d: int, count: int):
    rng = _rng()
    angles = np.array([np.pi / 2, np.pi / 2 + 2 * np.pi / 3, np.pi / 2 + 4 * np.pi / 3])
    truth = _two_layer(np.stack([np.cos(angles), np.sin(angles)], 1), 0.3 * np.ones(3), np.ones(3))
    rows = []
    for k in range(count):
        group = np.arange(d) % 3 if k % 5 else np.r_[np.arange(3), np.full(d - 3, 3 + k % 2)]
        orient = rng.choice([-1.0, 1.0], size=d)
        w = truth.w[group % 3] * orient[:, None] * rng.uniform(0.5, 1.5, (d, 1))
        b = truth.b[group % 3] * orient * rng.uniform(0.5, 1.5, d)
        rows.append({"label": " ".join("+" if o > 0 else "-" for o in orient[:3]) + (" | 1 degenerate" if k % 4 == 3
                                                                                     else ""),
                     "params": _two_layer(w, b, rng.uniform(0.5, 1.5, d)), "group": group,
                     "orientation": orient, "note": f"K={1e-32:.0e}  rank 10/{4 * d + 1 - d}"})
    return truth, rows


def _symmetry(which, d, count):
    from slt_relu.plots import effective_weights_figure, phase_gallery_figure

    truth, rows = _symmetry_rows(d, count)
    if which == "true_set_width":
        title = (f"m_symmetric_3: phases of W0 for width {d} ({count}); colour = truth boundary, dashed = reversed, "
                 "black = hidden group")
        return phase_gallery_figure(truth, rows, title=title, half_width=1.0)
    return effective_weights_figure(truth, rows, title=f"m_symmetric_3, width {d}: effective weights |q_i| w_i "
                                                        "(grey: truth)")


def _grid(R=41):
    x = np.linspace(-1.5, 1.5, R)
    return np.stack(np.meshgrid(x, x), -1)


def _regions(which):
    from slt_relu.plots import affine_map_figure, layer_boundaries_figure, lines_figure, regions_figure

    rng, grid = _rng(), _grid()
    if which == "lines":
        return lines_figure([24, 48, 96, 192], [11.4, 26.9, 52.6, 97.0], [0.5, 1.0, 2.0, 4.0], 0.508,
                            title="regions along random segments of length 4.0 (n_in = 4, 3 hidden layers, He "
                                  "weights): about linear in N")
    layers = [grid @ rng.normal(size=(2, 8)) + rng.normal(size=8) for _ in range(3)]
    out = grid @ rng.normal(size=2) + 0.1
    if which == "annulus_layers":
        return layer_boundaries_figure(grid, layers, out, title="Sattelberg Fig. 5: zero sets layer by layer (earlier "
                                       "layers in grey); each layer bends only where it meets an earlier boundary")
    dual = rng.normal(size=(200, 3))
    if which == "xor_affine_map":
        return affine_map_figure(grid, dual, dual[:20] * 0.5, -out, out, resid=0.83)
    pre = np.concatenate(layers, -1)
    if which == "xor_regions":
        pre = np.stack([grid.sum(-1) + 1, grid.sum(-1)], -1)
        return regions_figure(grid, pre > 0, grid.sum(-1) - 0.5, [pre], dual[:3],
                              title="Sattelberg's XOR network relu(x+y+1) - 2 relu(x+y) - 1: three regions, the "
                                    "fourth pattern (0, 1) is empty",
                              points=(np.array([[1.0, 1], [-1, -1], [1, -1], [-1, 1]]), np.array([0, 0, 1, 1])),
                              extra=("k-means on the dual points: rebuilt f", [1, 2, 3], [0.83, 0.9, 0.0], "clusters k",
                                     "rms error of the rebuilt f"))
    pts = rng.uniform(-1.5, 1.5, (300, 2))
    return regions_figure(grid, pre > 0, out, layers, dual, points=(pts, (np.linalg.norm(pts, axis=1) < 0.8) * 1.0),
                          title="circle vs annulus, widths (2, 8, 8, 8, 1) trained with Adam: regions, f, dual points")


def _functional_dimension():
    from slt_relu.plots import functional_dimension_figure

    rng, rows = _rng(), []
    for n in (5, 10, 15):
        for dep in range(2, 7):
            for f in (1.0, 2.0):
                deficits = rng.integers(0, 10 * dep, 20) * (dep > 2)
                frac = float(np.mean(deficits == 0))
                rows.append({"n_in": n, "depth": dep, "point_factor": f, "fraction_at_bound": frac,
                             "fraction_ci95": (max(0.0, frac - 0.2), min(1.0, frac + 0.2)), "deficits": deficits})
    return functional_dimension_figure(rows, title="Batch functional dimension of He-initialised ReLU networks "
                                       "(n0, .., n0, 1) at Gaussian points (Grigsby et al. 2023)")


LLC_KNOWN = [("generic truth d = m = 3", 5.0, None), ("generic truth d = m = 3, global posterior", 5.0, None),
             ("Example 3.2: (wq - 0.2)^2", 0.5, None), ("normal crossing w^2 q^2", 0.5, 0.39),
             ("normal crossing w1^2 w2^4", 0.25, 0.225), ("normal crossing w1^2 w2^4 w3^6", 1 / 6, 0.111)]


def _llc(which):
    """learning_coefficient's figures of made-up rows, through the kind's results Dataset as a run draws them."""
    from slt_relu.kinds.llc_cases import dataset
    from slt_relu.plots import beta_sweep_figure, llc_calibration_figure, llc_cases_figure

    rng = _rng()
    if which == "llc_dslt4_phases/llc":
        rows = [{"name": f"PT{1 + (k > 1)} v = 1, width {3 + k // 6}: {'+ - +'[: 1 + k % 5]} | 1 degenerate",
                 "method": "sgld", "true_lambda": "unknown", "estimate": 5 + rng.normal(), "se": 0.2,
                 "exact_finite_n": None} for k in range(12)]
        return llc_cases_figure(dataset(rows, {}), title="Learning coefficient")
    if which == "llc_known_values/llc":
        rows = []
        for name, lam, exact in LLC_KNOWN:
            for method, loc in (("sgld", 3.0), ("beta_sweep", 3.0), ("beta_sweep", 0.0)):
                rows.append({"name": name, "method": method, "localization": loc, "true_lambda": lam,
                             "estimate": lam * (1 + 0.1 * rng.normal()), "se": 0.05 * lam, "exact_finite_n": exact})
        return llc_cases_figure(dataset(rows, {}), title="Learning coefficient")
    if which == "llc_known_values/beta_sweep":
        betas = np.array([0.0723, 0.108, 0.163, 0.217, 0.326])
        sweeps = [{"name": name, "method": "beta_sweep", "localization": 0.0, "true_lambda": lam, "betas": betas,
                   "expected_nl": 410 + lam / betas + rng.normal(size=5), "expected_nl_se": np.full(5, 0.5), "estimate": lam * 1.02, "se": 0.06, "intercept": 410.0}
                  for name, lam, _ in LLC_KNOWN]
        return beta_sweep_figure(dataset(sweeps, {}), n=10000)
    if which == "llc_known_values/settings":     # choose_llc_settings' figure, drawn from Python (not by the kind)
        from slt_relu.plots import llc_settings_figure
        from slt_relu.posterior.llc import LLCSettings
        from slt_relu.posterior.llc_tuning import SettingsChoice

        g = np.array([1000.0, 300.0, 100.0, 30.0, 10.0])
        est = np.array([0.05, 0.12, 0.2, 0.23, np.nan])
        reasons = ("scale: the top Hessian eigenvalue of L_n at w* is 0: candidate steps are fractions of 4 / (n beta "
                   "h_max + gamma)", "step 0.000133: the largest candidate with MALA acceptance >= 0.999 at gamma = 30 "
                   "(measured 0.9996)", "localization 30: its estimate 0.23 is within 2 standard errors and 5 % of the "
                   "previous candidate's 0.2: the plateau", "steps 50000: burn-in 25000 (the pilot's), then 25000 "
                   "steps; the pilot had 0.0112 effective draws per chain and step, about 1000 over 8 chains")
        choice = SettingsChoice(LLCSettings(localization=30.0, step_size=1.3e-4), reasons, 0.0, g,
                                np.array([1e-5, 4e-5, 1.2e-4, 1.3e-4, np.nan]), np.array([0.9995, 0.9993, 0.9991,
                                0.9996, np.nan]), est, np.full(5, 0.02), np.array([1.07, 1.05, 1.03, 1.01, np.nan]),
                                np.full(5, 2000.0), 0.2 + 0.05 * rng.normal(size=(8, 500)), 0.01)
        return llc_settings_figure(choice)
    steps, gammas = np.array([3e-5, 1e-4, 3e-4]), np.array([1.0, 3.0, 30.0, 100.0])
    grid = SimpleNamespace(step_sizes=steps, localizations=gammas, estimate=5 + rng.normal(size=(3, 4)),
                           se=np.full((3, 4), 0.3), accept=0.99 - rng.uniform(0, 0.06, (3, 4)),
                           mean_trace=5 + rng.normal(size=(3, 4, 300)))
    return llc_calibration_figure(grid, true_lambda=5.0, title="Calibration: generic truth d = m = 3")


RADIUS = ["other", "degenerate", "non_degenerate"]
SECTOR = ["other", "true_orientation", "reversed"]
LABELS = ["both truth nodes, true orientation", "not in W0", "the truth node, true orientation; one node degenerate",
          "orientation reversed on truth node 1; one node linear on the box", "truth node 1 carried by 2 nodes",
          "the truth node, true orientation; one node linear on the box"]
PT1_T = [1.0, 1.02, 1.04, 1.06, 1.08, 1.1, 1.12, 1.14, 1.16, 1.18, 1.2, 1.22, 1.24, 1.26, 1.28, 1.3, 1.32, 1.34,
         1.36, 1.43, 1.5, math.pi / 2]
PT2_V = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0, 2.25, 2.5, 2.75, 3.0]

# the posterior configs: the swept values along the crossover axis, the other axis (label, values, its
# n beta) or None, the rule's phases, the sampler, [compare]
POSTERIOR = {
    "dslt4_pt1_node_degeneracy": (PT1_T, ("t", None), RADIUS, "nuts", False),
    "dslt4_pt2_orientation_reversal": (PT2_V, ("v", None), SECTOR, "nuts", False),
    "dslt4_pt1_phase_diagram": (PT1_T[::2][:10], ("t", ("beta", ["wbic", 0.2, 0.35, 0.6, 1.0],
                                                        [1086, 2000, 3500, 6000, 10000])), RADIUS, "nuts", False),
    "dslt4_pt1_smc": (PT1_T, ("t", ("beta", ["wbic", 0.6], [1086, 6000])), RADIUS, "smc", True),
    "dslt4_pt2_smc": (PT2_V, ("v", None), SECTOR, "smc", False),
    "dslt4_free_energy": ([1.0, 1.3, math.pi / 2], ("t", ("beta", [0.1, 0.3, 1.0, 3.0, 10.0],
                                                          [1e3, 3e3, 1e4, 3e4, 1e5])), RADIUS, "smc", False),
}


def _posterior(config: str, which: str):
    from slt_relu.plots import (cross_table_figure, free_energy_figure, free_energy_scaling_figure,
                                phase_diagram_figure, phase_mass_figure, posterior_traces_figure,
                                weights_facets_figure)
    from slt_relu.plots.posterior import trace_lines

    xs, (xlabel, other), phases, sampler, compare = POSTERIOR[config]
    rng, xs, X = _rng(), np.asarray(xs, float), len(xs)
    L = 1 if other is None else len(other[1])
    shades = None if other is None else (other[0], other[1][0], other[1][-1])
    title = "DSLT4 PT1 (node degeneracy)" if "pt1" in config or "free" in config else "DSLT4 PT2 (orientation reversal)"
    rule = "radius" if phases is RADIUS else "sector"

    def masses(names):
        m = rng.dirichlet(np.ones(len(names)), size=(L, X))
        return {nm: (m[..., k], 0.05 * m[..., k]) for k, nm in enumerate(names)}

    unconverged = {nm: rng.random((L, X)) < 0.2 for nm in phases} if sampler == "smc" else None
    if which == "phase_mass":
        panels = [(f"DSLT4 rule: {rule}", masses(phases), unconverged),
                  ("classify_phase: phases of W0 at the data's resolution", masses(LABELS), unconverged)]
        if compare:
            panels.append((f"NUTS on the same data sets: {rule} rule", masses(phases), None))
        return phase_mass_figure(xs, xlabel, panels, title=title, shades=shades,
                                 crossover=(1.19, 0.03) if other is None else None)
    if which == "rules_vs_phases":
        tables = {nm: {lab: m for lab, (m, _) in masses(LABELS[:4]).items()} for nm in phases}
        return cross_table_figure(xs, xlabel, tables, title=f"{title}: DSLT4's {rule} rule against classify_phase",
                                  shades=shades)
    if which == "free_energy":
        curves = {nm: (-np.log(m), s / m) for nm, (m, s) in masses(phases[1:]).items()}
        return free_energy_figure(xs, xlabel, curves, title=title, shades=shades, unconverged=unconverged)
    if which == "free_energy_scaling":
        n_beta = np.asarray(other[2], float)
        t, B = np.log(n_beta), len(n_beta)
        curves = {nm: (15 + k + 2.5 * t + rng.normal(size=(X, B)), np.full((X, B), 0.3),
                       2.5 + 0.2 * rng.normal(size=X), np.full(X, 0.1)) for k, nm in enumerate(phases[1:])}
        curves[phases[1]][0][0, 1:] = np.nan                # a point measured at one n beta only: no fit
        curves[phases[1]][2][0] = np.nan
        return free_energy_scaling_figure(xs, xlabel, n_beta, curves, title=title)
    if which == "phase_diagram":
        ys = np.asarray(other[2], float)
        grids = {nm: rng.random((L, X)) for nm in phases}
        return phase_diagram_figure(xs, ys, grids, 1.15 + 0.03 * np.arange(L), np.full(L, 0.02), xlabel=xlabel,
                                    ylabel="n beta", crossover_label=f"crossover {xlabel} ({' = '.join(phases[1:])})",
                                    title=title)
    if which == "effective_weights":
        values = [(v, x) for v in (other[1] if other else [None]) for x in xs][:13]     # 3 rows, the last one short
        panels = [(", ".join(([f"beta = {v}"] if v is not None else []) + [f"{xlabel} = {x:.4g}"]),
                   rng.normal(size=(400, 2)), np.array([[-0.8, 1.0], [0.8, 1.0]])) for v, x in values]
        return weights_facets_figure(panels, title=f"{title}: posterior density of the effective weights |q_i| w_i "
                                                   "(all nodes)")
    if which == "traces":
        pick = [0, X // 2, X - 1]
        traces = [({"posterior.beta": "wbic", f"truth.{xlabel}": float(xs[i])} if other else
                   {f"truth.{xlabel}": float(xs[i])},
                   *trace_lines(1.42 + 0.005 * rng.normal(size=(4, 300)), np.abs(rng.normal(size=(4, 300, 2)))))
                  for i in pick]
        return posterior_traces_figure(traces, title=f"{title}: traces")
    raise KeyError(which)


_POSTERIOR_FIGURES = {
    "dslt4_pt1_node_degeneracy": ["phase_mass", "rules_vs_phases", "effective_weights", "traces"],
    "dslt4_pt2_orientation_reversal": ["phase_mass", "rules_vs_phases", "effective_weights", "traces"],
    "dslt4_pt1_phase_diagram": ["phase_mass", "rules_vs_phases", "phase_diagram", "effective_weights", "traces"],
    "dslt4_pt1_smc": ["phase_mass", "rules_vs_phases", "free_energy", "free_energy_scaling", "phase_diagram",
                      "effective_weights"],
    "dslt4_pt2_smc": ["phase_mass", "rules_vs_phases", "free_energy", "effective_weights"],
    "dslt4_free_energy": ["phase_mass", "rules_vs_phases", "free_energy", "free_energy_scaling", "phase_diagram",
                          "effective_weights"],
}

LAMBDA_CASES = ["w2^2", "w1^2 w2^2", "w2^4", "w1^2 w2^4", "w1^4 w2^4", "w2^6", "w1^2 w2^6", "w1^4 w2^6", "w1^6 w2^6",
                "w1^2 + w2^4", "regular d = 4", "RRR 3-2-3, r = 0", "RRR 3-2-3, r = 1", "RRR 2-1-2, r = 0",
                "DLN 3-3-3-3, r = 0", "DLN 2-2-2-2, r = 1"]


def _curve(t, mean_loss):
    """A TemperedCurve of runs with the given t and E_t[L] (no free energy)."""
    from slt_relu.posterior.learning_coefficient import TemperedCurve

    return TemperedCurve(t, np.full(t.shape, np.nan), mean_loss, np.full(len(t), np.nan), 0)


def _lambda_figure(rows, curves):
    """The lambda_curve kind's figure of made-up rows, through the kind's results Dataset as a run draws it."""
    from slt_relu.kinds.lambda_curve_report import dataset
    from slt_relu.plots import lambda_curve_figure

    for row in rows:
        row.setdefault("n", None)
        row.setdefault("family", "")
        row.setdefault("curve", next(iter(row["estimators"])))
    return lambda_curve_figure(dataset(rows, curves))


def _lambda_curve():
    """known_lambda_suite's figure: its 16 cases, 5 estimators (SMC's three, NUTS's, SGLD's) and Gibbs's on the 5
    linear ones, 8 runs of 200 stages each over t = 1e-3 .. 1e16."""
    rng, rows, curves = _rng(), [], []
    for k, name in enumerate(LAMBDA_CASES):
        lam, m = 0.25 + 0.25 * (k % 7), 1 + (k % 3 == 0)
        names = ("free_energy", "tempered_loss", "thermodynamic", "nuts_tempered_loss", "sgld_tempered_loss") + (
            ("gibbs_tempered_loss",) if name.startswith(("RRR", "DLN")) else ())
        rows.append({"name": name, "lambda_exact": lam, "m_exact": m, "t_range": [1e3, 1e16],
                     "estimators": {est: {"lambda": lam * (1 + 0.03 * rng.normal()), "lambda_se": 0.01 * lam, "m": m}
                                    for est in names}})
        t = np.tile(np.geomspace(1e-3, 1e16, 200), (8, 1))
        curves.append(_curve(t, lam / t * (1 - np.exp(-t)) * (1 + 0.02 * rng.normal(size=t.shape))))
    return _lambda_figure(rows, curves)


def _lambda_curve_large():
    """known_lambda_large's figure: its 12 cases by the Gibbs estimator alone (the curve its chains give: 8 chains at
    10 temperatures), lambda from 3 to 3236."""
    rng, rows, curves = _rng(), [], []
    for k in range(12):
        lam, m = 3.0 * 1.9 ** k, 1 + k % 5
        rows.append({"name": f"DLN case {k}, r = {k % 4}", "lambda_exact": lam, "m_exact": m, "t_range": [1e4, 1e8],
                     "curve": "gibbs_tempered_loss",
                     "estimators": {"gibbs_tempered_loss": {"lambda": lam * (1 + 0.01 * rng.normal()),
                                                            "lambda_se": 0.003 * lam, "m": None,
                                                            "run_loss_min": [0.0] * 8}}})
        t = np.tile(np.geomspace(1e4, 1e8, 8), (8, 1))
        curves.append(_curve(t, lam / t * (1 + 0.01 * rng.normal(size=t.shape))))
    return _lambda_figure(rows, curves)


def _lambda_per_phase():
    """lambda_per_phase's figure: 4 phases of W0 (exact 2, 8/3, 5, 5), 3 estimators and SGLD's reference each, 8
    runs of 300 stages to t = 1e9 (PT1) and 4 of 200 to 1e6 (PT2): two fitted windows."""
    rng, rows, curves = _rng(), [], []
    for name, lam, runs, t_max in (("PT1 t = pi/2: + | 1 degenerate", 2.0, 8, 1e9), ("PT1 t = pi/2: ++", 8 / 3, 8, 1e9),
                                   ("PT2 v = 1: + + +", 5.0, 4, 1e6), ("PT2 v = 1: - - -", 5.0, 4, 1e6)):
        rows.append({"name": name, "lambda_exact": lam, "m_exact": 1, "t_range": [t_max / 1e3, t_max],
                     "estimators": {est: {"lambda": lam * (1 + 0.05 * rng.normal()), "lambda_se": 0.03 * lam, "m": None}
                                    for est in ("free_energy", "tempered_loss", "thermodynamic")},
                     "reference": {"name": "SGLD (llc_dslt4_phases)", "estimate": lam * 1.12, "se": 0.03 * lam}})
        t = np.tile(np.geomspace(1e-3, t_max, 300 if runs == 8 else 200), (runs, 1))
        noise = 1 + 0.02 * rng.normal(size=t.shape)
        curves.append(_curve(t, lam / t * (1 - np.exp(-t)) * noise))
    return _lambda_figure(rows, curves)


def _susceptibility():
    """benchmarks/pt1_susceptibility.py's figure: two observables over a 6 x 6 grid of the input box (not drawn
    by a kind: listed under the posterior kind's PT1 SMC config, whose posterior it reads)."""
    from slt_relu.plots import susceptibility_figure

    rng = _rng()
    edges = np.linspace(-1, 1, 7)
    chi = 0.01 * rng.normal(size=(2, 6, 6))
    chi[:, 4:] += 0.03
    se = np.full_like(chi, 0.008)
    return susceptibility_figure(edges, edges, chi, se, panel_titles=["radius rule: degenerate",
                                                                      "classify_phase: + | 1 degenerate"],
                                 lines=[("truth's kink x2 = 0.3", [-1, 1], [0.3, 0.3])], significance=3.0,
                                 title="DSLT4 PT1 at t = 1.571, n = 10000, n beta = 1086: which inputs pull the "
                                       "posterior towards the degenerate phase (chi_A > 0: more data in cell A raises "
                                       "its mass; mean over 6 data sets x 6 SMC runs, se from their spread)")


def _tms_rows():
    """tms_kgons' table: every k-gon and variant of c = 4, 5, 6, 8, their kinds roughly as the real table's."""
    rows = []
    for c in (4, 5, 6, 8):
        for k in range(1, c + 1):
            for npos in range(c - k + 1):
                kind = ("not critical" if k == 1 and npos else "minimum" if npos in (0, c - k) and (k > 4 or npos == 0)
                        else "saddle" if k < 4 else "numerical minimum")
                rows.append({"c": c, "k": k, "variant": "+" * npos + "-" * (c - k - npos), "n_positive": npos,
                             "loss": (k * 0.01 * max(k - 4, 0) + (c - k) / 3) / c - npos / (4 * c * c), "kind": kind,
                             "lambda_exact": (k + c / 2) if kind == "minimum" else None, "lambda": None,
                             "lambda_se": None})
    return rows


def _tms(which: str):
    """tms_kgons' figures: its 27 minima's columns of W, lambda of 6 k-gons (8 runs of 120 stages), the losses;
    through the kind's results Dataset as a run draws them."""
    from slt_relu.kinds.tms_kind import dataset
    from slt_relu.plots import kgon_gallery_figure, kgon_loss_figure, tms_lambda_figure

    rng, rows = _rng(), _tms_rows()
    kgons = []
    for r in rows:
        r.update({"length": 1.0, "bias": 0.0, "grad_norm": 0.0, "fisher_rank": 0,
                  "hessian": {"positive": 0, "zero": 0, "negative": 0}})
        theta = 2 * np.pi * np.arange(r["k"]) / r["k"]
        W = np.zeros((2, r["c"]))
        W[:, :r["k"]] = (1.0 + 0.1 * max(r["k"] - 4, 0)) * np.stack([np.cos(theta), np.sin(theta)])
        unused = np.where(np.arange(r["c"] - r["k"]) < r["n_positive"], 0.1, -0.1)
        kgons.append(SimpleNamespace(W=W, b=np.concatenate([np.full(r["k"], -0.3), unused])))
    if which == "kgons":
        for r in rows:
            if r["kind"] == "minimum" and r["c"] in (5, 6) and r["k"] >= 4:
                r.update({"lambda": r["lambda_exact"] * 1.01, "lambda_se": 0.02})
        ds = dataset(rows, [], [], kgons)
        return kgon_gallery_figure(ds.isel(row=np.flatnonzero(ds["critical_kind"].values == "minimum")))
    if which == "lambda":
        chosen, curves = [], []
        for c, k, v, lam in ((5, 4, "-", 6.5), (5, 5, "", 7.0), (6, 4, "--", 7.5), (6, 5, "-", 7.0), (6, 5, "+", 8.5),
                             (6, 6, "", 8.5)):
            i = next(i for i, r in enumerate(rows) if (r["c"], r["k"], r["variant"]) == (c, k, v))
            rows[i].update({"lambda_exact": lam, "lambda": lam + 0.05 * rng.normal(), "lambda_se": 0.02,
                            "fit": {"t_range": [1e7, 1e10]}})
            chosen.append(i)
            t = np.tile(np.geomspace(1e2, 1e10, 120), (8, 1))
            curves.append(_curve(t, lam / t * (1 - np.exp(-t / 1e5)) * (1 + 0.03 * rng.normal(size=t.shape))))
        return tms_lambda_figure(dataset(rows, chosen, curves, kgons))
    return kgon_loss_figure(dataset(rows, [], [], kgons))


def _tms_transition(c: int):
    """tms_transition's figure: c + 2 phases over 12 n, the c-gon taking the lead from the (c-1)-gon near n = 435
    (c = 6) or 35 (c = 5), two phases' local free energies against their asymptotic lines, the kind's title."""
    from slt_relu.plots import tms_transition_figure

    at, lo, hi = (435.0, 50, 5000) if c == 6 else (35.0, 4, 1000)
    ns = np.geomspace(lo, hi, 12)
    top = 1 / (1 + np.exp(-3 * (np.log(ns) - np.log(at))))
    mass = np.zeros((12, c + 2))
    mass[:, 0], mass[:, 1], mass[:, -1] = top, 0.6 * (1 - top), 0.4 * (1 - top)
    a, b = f"{c}-gon", f"{c - 1}-gon"
    free = {name: {"n": ns[3:], "G": lam * np.log(ns[3:]) + 2.0 + 0.3 * np.sin(ns[3:]), "G_se": np.full(9, 0.4),
                   "lambda": lam, "C": 2.0} for name, lam in ((a, 8.5), (b + " -", 7.0))}
    return tms_transition_figure(ns, [f"{k}-gon" for k in range(c, -1, -1)] + ["none"], mass,
                                 np.full_like(mass, 0.03), np.log(top / (0.6 * (1 - top))), at, 0.12 * at, 1.02 * at,
                                 pair=(a, b), free_energy=free,
                                 title=f"TMS c = {c}, beta = 1: the posterior mass of each k-gon phase (tempered SMC, "
                                       f"8 data sets x 4 runs per n), where the {a} takes the lead from the {b}, and "
                                       f"each phase's local free energy against its asymptotic form")


def _tms_training():
    """tms_training's figure: 4 n x 32 runs x 20 checkpoints, 12 phases (0-gons to the 6-gon), 7 snapshots."""
    import xarray as xr

    from slt_relu.kinds.tms_training_kind import figure

    rng = _rng()
    N, R, K, c = 4, 32, 20, 6
    names = ["0-gon ------", "0-gon ++++++", "0-gon +++++-", "1-gon +++++", "1-gon ++++-", "2-gon ++++", "none",
             "4-gon ++", "4-gon +-", "5-gon -", "5-gon +", "6-gon"]
    stage = np.minimum(np.arange(K) // 2, len(names) - 1)
    phases = np.asarray(names, dtype=object)[np.minimum(stage[None, None] + rng.integers(0, 2, (N, R, 1)),
                                                        len(names) - 1)].astype(str)
    steps = np.concatenate([[0], np.geomspace(1, 5000, K - 1).round()]).astype(int)
    loss = 0.3 * np.exp(-np.linspace(0, 2, K)) * (1 + 0.05 * rng.random((N, R, K)))
    llc = np.linspace(-140, 9, K) * (1 + 0.05 * rng.random((N, R, K)))
    theta = np.linspace(0, 2 * np.pi, c, endpoint=False)
    W = np.broadcast_to(np.stack([np.cos(theta), np.sin(theta)]), (N, R, K, 2, c))
    nrk = ("n", "run", "checkpoint")
    ds = xr.Dataset({"W": (nrk + ("hidden", "feature"), W), "b": (nrk + ("feature",), np.full((N, R, K, c), -0.2)),
                     "phase": (nrk, phases), "population_loss": (nrk, loss), "llc": (nrk, llc),
                     "llc_se": (nrk, np.full((N, R, K), 0.3)),
                     "kgon_loss": ("kgon", [0.0482, 0.0618, 0.0687, 0.111]),
                     "kgon_lambda": ("kgon", [8.5, 8.5, 7.0, 7.5])},
                    coords={"n": [100, 400, 1600, 5000], "step": ("checkpoint", steps),
                            "kgon": ["6-gon", "5-gon +", "5-gon -", "4-gon --"]},
                    attrs={"c": c, "batch_size": 0, "optimizer": "adam", "learning_rate": 0.01, "init_std": 0.1})
    return figure(ds)


FIGURES = {
    "network_landscape": {f"{c}/{w}": (lambda c=c, w=w: _network_landscape(c, w)) for c in NETWORK_LANDSCAPE
                          for w in ("landscape", "hessian_density", "regions")
                          if w != "regions" or NETWORK_LANDSCAPE[c][7] is not None},
    "tms_training": {"tms_training/training": _tms_training},
    "lambda_curve": {"known_lambda_suite/lambda_curve": _lambda_curve,
                     "lambda_per_phase/lambda_curve": _lambda_per_phase,
                     "known_lambda_large/lambda_curve": _lambda_curve_large},
    "tms": {f"tms_kgons/{w}": (lambda w=w: _tms(w)) for w in ("kgons", "lambda", "loss_landscape")},
    "tms_transition": {"tms_transition/transition": lambda: _tms_transition(6),
                       "tms_transition_c5/transition": lambda: _tms_transition(5)},
    "landscape": {"dslt3_degenerate_node/landscape": lambda: _landscape(True),
                  "dslt3_scaling_valley/landscape": lambda: _landscape(False)},
    "fisher": {f"fisher_rank_survey/{w}": (lambda w=w: _fisher(w)) for w in ("rank_vs_bound", "spectrum")},
    "symmetry": {f"true_set_m_symmetric/{w}{d}": (lambda w=w, d=d, c=c: _symmetry(w, d, c))
                 for w in ("true_set_width", "effective_weights_width") for d, c in ((3, 2), (5, 13))},
    "regions": {f"linear_regions_xor/{w}": (lambda w=w: _regions(w))
                for w in ("xor_regions", "xor_affine_map", "annulus_regions", "annulus_layers", "lines")},
    "functional_dimension": {"functional_dimension_depth_width/functional_dimension": _functional_dimension},
    "learning_coefficient": {w: (lambda w=w: _llc(w)) for w in (
        "llc_known_values/llc", "llc_known_values/beta_sweep", "llc_known_values/calibration",
        "llc_known_values/settings", "llc_dslt4_phases/llc")},
    "posterior": {**{f"{c}/{w}": (lambda c=c, w=w: _posterior(c, w)) for c, ws in _POSTERIOR_FIGURES.items()
                     for w in ws}, "dslt4_pt1_smc/susceptibility": _susceptibility},
}
CASES = [(kind, case) for kind, cases in FIGURES.items() for case in cases]


def _figure_name(name: str) -> str:
    """A figure's name without its digits (true_set_width4 -> true_set_width)."""
    return name.rstrip("0123456789")


@pytest.mark.parametrize("kind,case", CASES, ids=[case for _, case in CASES])
def test_figure_layout(kind, case):
    fig = FIGURES[kind][case]()
    problems = layout_problems(fig)
    assert not problems, f"{case}:\n" + "\n".join(problems)


def test_every_kind_and_figure_function_has_cases(monkeypatch):
    """A new kind, shipped config or figure function of slt_relu.plots fails here until it has a case above."""
    import slt_relu.plots as plots
    from slt_relu.kinds import KINDS
    from slt_relu.workflow import runner

    assert sorted(KINDS) == sorted(FIGURES), "FIGURES: one entry per kind"
    configs = {case.split("/")[0] for _, case in CASES}
    assert configs == {p.stem for p in runner.shipped_configs()}, "FIGURES: cases for every shipped config"
    functions = [n for n in plots.__all__ if n.endswith("_figure") and n != "save_figure"]
    called = set()
    for fn in functions:
        real = getattr(plots, fn)
        monkeypatch.setattr(plots, fn, lambda *a, _fn=fn, _real=real, **k: called.add(_fn))
    for kind, case in CASES:
        FIGURES[kind][case]()
    assert called == set(functions), f"figure functions without a case: {sorted(set(functions) - called)}"


# the kinds cheap enough to run here (seconds each, on top of their tiny settings); the posterior,
# learning_coefficient and regions kinds compile samplers and training loops for 15-60 s per config
REAL_RUNS = {
    "true_set_m_symmetric.toml": {"symmetry.widths": [3], "symmetry.checks": 0},
    "dslt3_degenerate_node.toml": {"landscape.resolution": 7, "landscape.fisher_points": 2},
    "functional_dimension_depth_width.toml": {"functional_dimension.n_in": [2], "functional_dimension.depths": [2, 3],
                                              "functional_dimension.networks": 1},
    "fisher_rank_survey.toml": {"inputs.cells": 2, "fisher.points[0].widths": [1], "fisher.points[1].m": [2]},
}


@pytest.mark.parametrize("config", sorted(REAL_RUNS))
def test_kind_runs_draw_only_listed_figures(tmp_path, config):
    """A real run of a cheap kind: its figures are laid out cleanly, and each has a case in FIGURES
    under its kind (so a figure a kind starts drawing fails here until it has one)."""
    import jax

    from slt_relu.workflow import runner
    from tiny import TINY

    x64 = bool(jax.config.read("jax_enable_x64"))
    try:
        prep = runner.prepare(ROOT / "experiments" / config, {**TINY[config], **REAL_RUNS[config]})
        ctx = runner.RunContext(tmp_path / "checkpoints", False, prep.settings.seed)
        output = prep.kind.run(prep.resolved, jax.random.PRNGKey(prep.settings.seed), ctx)
    finally:
        jax.config.update("jax_enable_x64", x64)
    from slt_relu.netcdf import write_tree           # drawn from results.nc as written and read back
    from slt_relu.workflow.output import read_results

    figures = prep.kind.figures(prep.resolved, read_results(write_tree(output.results, tmp_path / "results.nc")))
    listed = {_figure_name(case.split("/")[1]) for case in FIGURES[prep.settings.kind]}
    assert figures and {_figure_name(n) for n in figures} <= listed
    for name, fig in figures.items():
        problems = layout_problems(fig)
        assert not problems, f"{config}: {name}:\n" + "\n".join(problems)
