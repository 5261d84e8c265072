"""Every notebook runs top to bottom (so none goes stale)."""
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    for line in EXPECTED[path.name]:
        assert line in text, line


EXPECTED = {
    "01_landscape_and_fisher.ipynb": ["rank 1 of 2", "excess=0"],
    "02_symmetries_and_phases.ipynb": ["phases: 2 8 34", "Figure 1 reduces to width 0", "Figure 2 pair equivalent: True ;"
                                       " after a small change: False", "-> reversed"],
    "03_regions_and_functional_dimension.ipynb": ["XOR in the box: exact 3  grid 3", "grid  513: 37 of 37 regions",
                                                  "generic (3, 6, 1): 25 of 25", "with a dead neuron: 21"],
    "04_posteriors_and_learning_coefficient.ipynb": ["ends > middle: True", "NUTS within 5 mcse of the grid: True",
                                                     "SGLD within 5 se + 0.03 of the exact value: True"],
}


def test_every_notebook_has_expectations():
    assert sorted(p.name for p in NOTEBOOKS) == sorted(EXPECTED)
