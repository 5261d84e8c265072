"""Figures are objects: the plotting functions return a Figure that pyplot does not hold, draw into a
given axes where they have one, and importing the package leaves matplotlib's backend alone."""
import subprocess
import sys

import numpy as np
from matplotlib.figure import Figure

from slt_relu.plots import free_energy_figure, lines_figure, phase_mass_figure, save_figure


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
