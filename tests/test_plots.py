"""Figures are objects: the plotting functions return a Figure that pyplot does not hold, the single-panel ones draw
into a given axes, every one documents the data it takes, and importing the package leaves matplotlib's backend
alone."""
import re
import subprocess
import sys

import numpy as np
import pytest
from matplotlib.figure import Figure

from slt_relu.plots import (free_energy_figure, free_energy_scaling_figure, kgon_loss_figure, landscape_figure,
                            lines_figure, llc_cases_figure, phase_mass_figure, save_figure, spectrum_figure)


def test_import_keeps_the_backend():
    code = ("import matplotlib; matplotlib.use('svg'); import slt_relu, slt_relu.plots; "
            "assert matplotlib.get_backend() == 'svg', matplotlib.get_backend()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


def test_figures_are_returned_not_held_by_pyplot(tmp_path):
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    xs = np.array([1.0, 2.0, 3.0])
    mass = {"a": (np.array([0.2, 0.5, 0.9]), np.array([0.01, 0.02, 0.01])),
            "b": (np.array([0.8, 0.5, 0.1]), np.array([0.01, 0.02, 0.01]))}
    fig = phase_mass_figure(xs, "v", [("masses", mass, None)], title="t")
    assert isinstance(fig, Figure) and plt.get_fignums() == before
    assert [ax.get_ylabel() for ax in fig.axes] == ["posterior mass"]
    path = save_figure(fig, tmp_path / "m.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_single_panel_figures_draw_into_a_given_axes():
    host = Figure()
    left, right = host.subplots(1, 2)
    fig = lines_figure([8, 16], [3.0, 5.0], [0.1, 0.2], 0.25, title="lines", ax=right)
    assert fig is host and right.get_xlabel() == "hidden neurons N" and left.get_xlabel() == ""
    curves = {"a": (np.array([[0.1, 0.2]]), np.array([[0.01, 0.01]]))}
    fig = free_energy_figure(np.array([1.0, 2.0]), "v", curves, title="F", ax=left)
    assert fig is host and host.get_suptitle() == ""          # another figure's title is not overwritten
    assert left.get_ylabel().startswith("F_alpha - F")


# ----------------------------------------------------------------------------------------------
# the public API: single-panel functions draw into a given axes; every function documents its data


def _spectrum_ds():
    import xarray as xr

    spec = np.array([[1.0, 1e-3, 1e-20, np.nan], [1.0, 0.1, 1e-2, 1e-19]])
    return xr.Dataset({"spectrum": (("point", "eigenvalue"), spec), "rank": ("point", [2, 3]),
                       "rtol": ("point", [1e-12, 1e-12])}, coords={"group": ("point", ["a", "b"])})


def _llc_ds():
    import xarray as xr

    return xr.Dataset({"estimate": ("row", [0.52, 0.24]), "se": ("row", [0.02, 0.03]),
                       "true_lambda": ("row", [0.5, 0.25])},
                      coords={"name": ("row", ["Example 3.2: (wq - 0.2)^2", "w1^2 w2^4"]),
                              "method": ("row", ["sgld", "sgld"])})


def _kgon_ds():
    import xarray as xr

    return xr.Dataset(coords={"c": ("row", [4, 4, 4]), "k": ("row", [3, 4, 2]),
                              "critical_kind": ("row", ["minimum", "minimum", "saddle"]),
                              "loss": ("row", [0.08, 0.0, 0.15])})


SINGLE_PANEL = {
    "landscape_figure": lambda ax: landscape_figure(
        np.linspace(-1, 1, 5), np.linspace(-1, 1, 4), np.add.outer(np.linspace(-1, 1, 5) ** 2, np.linspace(-1, 1, 4)),
        xlabel="w", ylabel="q", title="K", curves=[np.array([[0.0, -1.0], [0.0, 1.0]])], ax=ax),
    "spectrum_figure": lambda ax: spectrum_figure(_spectrum_ds(), ax=ax),
    "free_energy_figure": lambda ax: free_energy_figure(np.array([1.0, 2.0]), "v", {"a": (np.array([[0.1, 0.2]]),
                                                        np.array([[0.01, 0.01]]))}, title="F", ax=ax),
    "llc_cases_figure": lambda ax: llc_cases_figure(_llc_ds(), title="lambda", ax=ax),
    "lines_figure": lambda ax: lines_figure([8, 16], [3.0, 5.0], [0.1, 0.2], 0.25, title="lines", ax=ax),
    "kgon_loss_figure": lambda ax: kgon_loss_figure(_kgon_ds(), ax=ax),
}


def test_the_single_panel_functions_are_those_with_an_ax():
    """A new figure function is either single-panel (it takes ``ax`` and has a case above) or draws several panels
    (no ``ax``), and says which."""
    import inspect

    import slt_relu.plots as plots

    with_ax = {n for n in plots.__all__ if "ax" in inspect.signature(getattr(plots, n)).parameters}
    assert with_ax == set(SINGLE_PANEL)


@pytest.mark.parametrize("name", sorted(SINGLE_PANEL))
def test_a_single_panel_function_draws_into_the_given_axes(name):
    host = Figure()
    left, right = host.subplots(1, 2)
    host.suptitle("mine")
    fig = SINGLE_PANEL[name](right)
    assert fig is host and host.get_suptitle() == "mine"          # the host's figure, its title kept
    assert right.has_data() and right.get_xlabel() and right.get_ylabel()
    assert not left.has_data() and left.get_xlabel() == "" and left.get_title() == ""
    own = SINGLE_PANEL[name](None)                                 # without ax: a figure of its own
    assert isinstance(own, Figure) and own is not host and own.axes[0].has_data()


def test_every_function_documents_its_data_and_its_figure():
    import inspect

    import slt_relu.plots as plots

    for name in plots.__all__:
        doc = inspect.getdoc(getattr(plots, name)) or ""
        assert "Args:" in doc and "Returns:" in doc, name
        args = doc.split("Args:")[1].split("Returns:")[0]
        missing = [p for p in inspect.signature(getattr(plots, name)).parameters
                   if not re.search(rf"^    {p}:", args, re.M)]
        assert not missing, f"{name}: no Args entry for {missing}"
        if name != "save_figure":
            assert "Figure" in doc.split("Returns:")[1], name


def test_the_landscape_into_an_axes_has_no_along_panels():
    with pytest.raises(ValueError, match="along needs a figure of its own"):
        landscape_figure([0.0, 1.0], [0.0, 1.0], np.zeros((2, 2)), xlabel="x", ylabel="y", title="K",
                         along=[("mass", [0.0, 1.0], [1.0, 1.0], "mass")], ax=Figure().subplots())


def test_free_energy_scaling_draws_a_panel_per_phase_and_the_slopes():
    """A panel per phase (a line per point, a colour bar of the points' values) and one of the slopes; points
    that are not along one numeric axis are named on the colour bar and the slopes' axis."""
    n_beta = np.array([1e3, 3e3, 1e4])
    curves = {"degenerate": (np.ones((4, 3)), np.full((4, 3), 0.1), np.array([2.0, 2.1, np.nan, 2.3]), np.full(4, 0.1)),
              "non_degenerate": (np.ones((4, 3)), np.full((4, 3), 0.1), np.full(4, 2.5), np.full(4, 0.1))}
    fig = free_energy_scaling_figure([1.0, 1.1, 1.2, 1.3], "t", n_beta, curves, title="PT1")
    panels = [ax for ax in fig.axes if not hasattr(ax, "_colorbar")]
    assert [ax.get_title() for ax in panels] == ["phase: degenerate", "phase: non_degenerate",
                                                 "the slopes of the lines above: each phase's learning coefficient"]
    bar = next(ax for ax in fig.axes if hasattr(ax, "_colorbar"))
    assert bar.get_ylabel() == "t" and panels[2].get_xlabel() == "t"
    assert len(panels[2].lines) >= 2                       # a line of slopes per phase
    names = [f"point {k}" for k in range(4)]
    fig = free_energy_scaling_figure(np.arange(4), "sweep point", n_beta, curves, title="PT1", point_labels=names)
    bar = next(ax for ax in fig.axes if hasattr(ax, "_colorbar"))
    assert [t.get_text() for t in bar.get_yticklabels()] == names
    assert [t.get_text() for t in fig.axes[2].get_xticklabels()] == names


def test_labels_wrap_without_breaking_a_formula():
    from slt_relu.plots._style import fill

    assert fill("generic truth d = m = 3, global posterior", 20).split("\n")[1].startswith("d = m = 3,")
    assert fill("Example 3.2: (wq - 0.2)^2", 20) == "Example 3.2:\n(wq - 0.2)^2"
    assert fill("normal crossing w1^2 w2^4 w3^6", 20) == "normal crossing\nw1^2 w2^4 w3^6"
    assert fill("a b c", 20) == "a b c" and fill("", 10) == ""
