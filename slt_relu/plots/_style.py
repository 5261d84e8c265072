"""What the figures share: new figures that belong to no pyplot state (so importing the package never
touches matplotlib's backend, and a figure nobody keeps is freed), panel grids, the colours of phases
and of a node's group and orientation, and saving.

Layout rules every figure follows (``tests/test_figure_layout.py`` checks them on every figure the
shipped kinds draw, from matplotlib's own layout after drawing):

- figures use ``layout="constrained"``: titles, labels, colorbars and legends get their room, no
  ``tight_layout`` and no hand-tuned margins;
- a legend never sits on the data: :func:`legend_right` puts an axes' legend outside it, on its right;
  :func:`figure_legend` puts one legend for several panels below them all;
- every panel that shows data names its axes (or shares the axis, and its label, with the panel
  next to it: :func:`label_grid`);
- long titles are wrapped to the width they have (:func:`wrap`, :func:`suptitle`);
- log axes over less than a few decades get their ticks at the plotted values (:func:`log_ticks`) or at 1, 2
  and 5 times the powers of ten (:func:`round_log_ticks`), so that matplotlib's minor labels (2 x 10^3,
  3 x 10^3, ...) cannot run into each other and an axis within a decade still has labels.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator


def new_figure(figsize=None) -> Figure:
    """A figure outside pyplot, laid out by matplotlib's constrained layout."""
    return Figure(figsize=figsize, layout="constrained")


def subplots(nrows: int = 1, ncols: int = 1, *, figsize=None, **kwargs):
    """(fig, axes) like ``pyplot.subplots``, on a constrained-layout :class:`~matplotlib.figure.Figure`
    outside pyplot."""
    fig = new_figure(figsize)
    return fig, fig.subplots(nrows, ncols, **kwargs)


def figure_axes(ax, figsize):
    """(fig, ax): a new figure of one axes, or the given axes and its figure."""
    if ax is None:
        return subplots(figsize=figsize)
    return ax.figure, ax


def own_figure(fig, ax) -> bool:
    """Whether ax is the only axes of fig (a figure the plotting function made, not a host's)."""
    return fig.axes == [ax]


_OPERATORS = {"=", "+", "-", "*", "/", "<", ">", "<=", ">=", "~", "+-", "x", "|", "."}
_FORMULA_CHARS = set("^_=()[]|*/")


def _glue(words: list[str]) -> list[str]:
    """words joined into the pieces a line may not break inside: a formula stays whole, i.e. an operator
    (=, +, -, ...) stays with the words on both sides, a number with the word before it (``width 3``), and
    a word holding formula characters (^, _, =, parentheses, ...) with a piece holding some (``w1^2 w2^4``,
    ``relu(w1 x)``, ``n L_n(w0)``); a word ending in ':' or ',' ends a piece."""
    operator = lambda w: w.strip("()[]{}") in _OPERATORS
    number = lambda w: w.rstrip(":,)").replace(".", "", 1).isdigit()
    pieces = []
    for word in words:
        last = pieces[-1].split(" ")[-1] if pieces else ""
        if pieces and not last.endswith((":", ",")) and (
                operator(word) or operator(last) or number(word)
                or (_FORMULA_CHARS & set(word) and _FORMULA_CHARS & set(pieces[-1]))):
            pieces[-1] += " " + word
        else:
            pieces.append(word)
    return pieces


def fill(text: str, chars: int) -> str:
    """text wrapped to lines of about ``chars`` characters without breaking a formula (:func:`_glue`) where it
    fits on a line (a longer one breaks between its words)."""
    out = []
    for line in str(text).split("\n"):
        pieces = [p.replace(" ", "\u00a0") if len(p) <= chars else p            # no-break spaces inside a piece
                  for p in _glue(line.split(" "))]
        out.append(textwrap.fill(" ".join(pieces), chars, break_long_words=False, break_on_hyphens=False)
                   .replace("\u00a0", " ") or line)
    return "\n".join(out)


def wrap(text: str, width_in: float, fontsize: float) -> str:
    """text wrapped (each of its lines) to about width_in inches at fontsize points, formulas whole
    (:func:`fill`)."""
    chars = max(12, int(width_in * 72 / (0.6 * fontsize)))
    lines = []
    for line in str(text).split("\n"):            # a long line breaks after its first ': ' before anywhere else,
        head, sep, rest = line.partition(": ")      # so a title's formula stays whole
        lines += [head + ":", rest] if len(line) > chars and sep and len(head) < chars else [line]
    return "\n".join(fill(line, chars) for line in lines)


def suptitle(fig, title: str, fontsize: float = 10):
    """The figure's title, wrapped to the figure's width."""
    fig.suptitle(wrap(title, 0.92 * fig.get_figwidth(), fontsize), fontsize=fontsize)
    return fig


def panel_grid(n: int, width: float, height: float, *, share: bool = False, per_row: int = 6):
    """A figure with n panels of width x height inches, at most ``per_row`` per row; unused panels
    switched off.  share: the panels share both axes (same limits; their labels go on the outer
    panels, :func:`label_grid`).  Returns (fig, axes, nrows)."""
    cols = min(per_row, max(n, 1))
    nrows = -(-n // cols)
    fig, axes = subplots(nrows, cols, figsize=(width * cols, height * nrows + 0.5), squeeze=False,
                         sharex=share, sharey=share)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    return fig, axes, nrows


def label_grid(axes, n: int, xlabel: str, ylabel: str, fontsize: float = 8):
    """Axis labels on the outer panels of a grid of n panels sharing both axes: x (and its tick labels,
    which the shared axes hide above the last row) on the lowest used panel of each column, y on the
    first of each row."""
    rows, cols = axes.shape
    for c in range(cols):
        used = [r for r in range(rows) if r * cols + c < n]
        if used:
            axes[used[-1], c].set_xlabel(xlabel, fontsize=fontsize)
            axes[used[-1], c].tick_params(labelbottom=True)
    for r in range(rows):
        if r * cols < n:
            axes[r, 0].set_ylabel(ylabel, fontsize=fontsize)


def finish_panels(fig, title: str, nrows: int | None = None):
    """The panel grid's title (wrapped to the figure's width); returns fig.  (nrows: unused, kept for
    callers; constrained layout makes the room.)"""
    return suptitle(fig, title)


def legend_right(ax, fontsize: float = 7, wrap_at: int = 34, **kwargs):
    """ax's legend outside the axes, to its right, top-aligned (constrained layout makes the room);
    long labels wrapped at wrap_at characters.  None when ax has nothing labelled."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    labels = [fill(lab, wrap_at) for lab in labels]
    return ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                     fontsize=fontsize, **kwargs)


def figure_legend(fig, handles=None, labels=None, *, axes=None, ncol: int | None = None, fontsize: float = 7,
                  wrap_at: int = 48):
    """One legend for several panels, below them all (``outside lower center``): the given handles,
    or the distinct labels of ``axes`` (default: all of fig's).  None when there is nothing labelled."""
    if handles is None:
        handles, labels = [], []
        for ax in (fig.axes if axes is None else axes):
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
    if not handles:
        return None
    labels = [fill(lab, wrap_at) for lab in labels]
    ncol = ncol or min(len(labels), max(1, int(fig.get_figwidth() // 3.2)))
    return fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=fontsize)


def log_ticks(ax, values, axis: str = "x", fmt: str = "{:.4g}"):
    """A log axis over few decades: major ticks at the plotted values, no minor labels."""
    values = np.unique(np.asarray(values, float)[np.isfinite(values)])
    target = ax.xaxis if axis == "x" else ax.yaxis
    if len(values) == 0 or values.min() <= 0:
        return
    target.set_major_locator(FixedLocator(values))
    target.set_major_formatter(matplotlib.ticker.FixedFormatter([fmt.format(v) for v in values]))
    target.set_minor_locator(NullLocator())
    target.set_minor_formatter(NullFormatter())


def round_log_ticks(ax, axis: str = "x"):
    """A log axis over a few decades: major ticks at 1, 2 and 5 times the powers of ten, labelled as plain
    numbers (50, 100, 200, ...), no minor labels."""
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_formatter(NullFormatter())


def group_style(group: int, orient: float, m: int):
    """Colour by truth boundary (tab10), black for hidden groups, grey for degenerate nodes;
    solid for the truth's orientation, dashed for reversed nodes."""
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    if group < 0:
        return "0.6", ":"
    color = colors[group % len(colors)] if group < m else "k"
    return color, "-" if orient >= 0 else "--"


PHASE_COLOURS = {"degenerate": "tab:red", "non_degenerate": "tab:blue", "true_orientation": "tab:blue",
                  "reversed": "tab:red", "other": "tab:gray"}


def settle(fig):
    """Lay fig out once before it is drawn for real where it has a fixed-aspect panel: constrained
    layout's first pass misplaces the labels of such panels without ticks (matplotlib 3.11), its second
    pass is right. Other figures are laid out right at once and skip the extra pass."""
    if any(ax.get_aspect() != "auto" for ax in fig.axes):
        fig.draw_without_rendering()
    return fig


def save_figure(fig, path: Path, dpi: int = 120) -> Path:
    """Write a figure as a PNG, as the runner writes every figure (laid out twice where a panel has a fixed
    aspect, :func:`settle`; the same figure gives the same bytes).

    Args:
        fig: the Figure (any, e.g. one of these functions' or your own).
        path: the file to write.
        dpi: its resolution (the figures' sizes are in inches: 120 dpi makes an 8 in figure 960 pixels wide).

    Returns:
        the path.
    """
    settle(fig)
    fig.savefig(path, dpi=dpi)
    return Path(path)
