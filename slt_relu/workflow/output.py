"""A kind's Output (``slt_relu.workflow.kind``) as the files of a results folder: metrics.json, results.nc, the
figures, draws/NAME.nc.  A kind's ``figures(resolved, results)`` is drawn from ``results.nc`` as written and the
resolved config, at the end of a run (``runner``) and again by ``slt-relu plot`` (``replot``)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["draw_figures", "read_results", "save_figures", "to_json", "write_output"]


def to_json(value):
    """Convert numpy / JAX scalars and arrays to plain JSON values (NaN -> None)."""
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return to_json(np.asarray(value).tolist())
    if hasattr(value, "model_dump"):
        return to_json(value.model_dump(mode="json"))
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def write_json(path: Path, data) -> None:
    path.write_text(json.dumps(to_json(data), indent=2, sort_keys=False) + "\n")


def write_output(output, folder: Path, kind, resolved) -> None:
    """A kind's Output (``slt_relu.workflow.kind``) as files: metrics.json, results.nc, NAME.png, draws/NAME.nc.
    The figures of a kind with a ``figures`` function are drawn from results.nc as written (:func:`draw_figures`)."""
    from ..netcdf import write_tree

    write_json(folder / "metrics.json", output.metrics)
    if output.results is not None:
        write_tree(output.results, folder / "results.nc")
    if kind.figures is not None:
        draw_figures(kind, resolved, folder, folder)
    if output.draws:
        (folder / "draws").mkdir()
        for name, tree in output.draws.items():
            write_tree(tree, folder / "draws" / f"{name}.nc")


def save_figures(figures: dict, folder: Path) -> list[Path]:
    """Each {name: Figure} as ``folder/NAME.png``, closed once written; the paths."""
    import matplotlib.pyplot as plt

    from ..plots import save_figure

    out = []
    for name, fig in figures.items():
        out.append(save_figure(fig, folder / f"{name}.png"))
        plt.close(fig)
    return out


def read_results(path: Path):
    """results.nc as a kind wrote it: its Dataset, or the DataTree where the file has groups."""
    from ..netcdf import read_tree

    tree = read_tree(path)
    return tree.to_dataset() if not tree.children else tree


def draw_figures(kind, resolved, folder: Path, out: Path) -> list[Path]:
    """The kind's figures (``Kind.figures``) drawn from ``folder/results.nc`` and the resolved settings,
    written as ``out/NAME.png``; the paths."""
    results = read_results(folder / "results.nc") if (folder / "results.nc").is_file() else None
    return save_figures(kind.figures(resolved, results), out)
