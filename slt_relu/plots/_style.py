"""What the figures share: new figures that belong to no pyplot state (so importing the package never
touches matplotlib's backend, and a figure nobody keeps is freed), panel grids, the colours of phases
and of a node's group and orientation, and saving."""
from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib.figure import Figure


def subplots(nrows: int = 1, ncols: int = 1, *, figsize=None, **kwargs):
    """(fig, axes) like ``pyplot.subplots``, on a :class:`~matplotlib.figure.Figure` outside pyplot."""
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **kwargs)


def figure_axes(ax, figsize):
    """(fig, ax): a new figure of one axes, or the given axes and its figure."""
    if ax is None:
        return subplots(figsize=figsize)
    return ax.figure, ax


def panel_grid(n: int, width: float, height: float):
    """A figure with n panels, at most 6 per row; unused panels switched off.  Returns (fig, axes, nrows)."""
    cols = min(6, max(n, 1))
    nrows = -(-n // cols)
    fig, axes = subplots(nrows, cols, figsize=(width * cols, height * nrows), squeeze=False)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    return fig, axes, nrows


def finish_panels(fig, title: str, nrows: int):
    """The panel grid's title and layout (room for the title above nrows rows); returns fig."""
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / (2.7 * nrows)))
    return fig


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


def save_figure(fig, path: Path, dpi: int = 120) -> Path:
    """Write fig as a PNG at path (the runner's one way of saving a figure); returns path."""
    fig.savefig(path, dpi=dpi)
    return Path(path)
