"""Every notebook runs top to bottom, and the outputs stored in it, which the site's Tutorials pages show
(docs/tutorials/, rendered without running), are what it prints now.

Stored: every non-empty code cell has been executed, in order, in one kernel (execution counts 1, 2, 3, ...).
`python tests/test_notebooks.py NAME ...` (no name: all) runs notebooks/NAME.ipynb again and stores its outputs.

Current: the fresh run's outputs equal the stored ones cell by cell, under these rules:

- compared: the cell's stdout, its chunks joined (how prints split into chunks depends on timing), the
  text/plain of execute_result and display_data outputs, and the kinds (MIME types) of the rich outputs, so an
  image stays where the stored cell has one;
- not compared: stderr (warnings, progress bars, the paths of the machine that ran it; the site hides it
  too), the bytes of images (fonts and libpng differ between machines), the execution timestamps in the
  cells' metadata;
- normalised: runs of spaces (numpy pads an array's numbers to the widest one) and memory addresses (0x...);
- numbers: the text between numbers must be equal; each number compares with
  |a - b| <= 1e-6 max(|a|, |b|) + 1e-10.  The 1e-10 covers numbers that are zero up to rounding: they change
  by orders of magnitude from one CPU to another (measured: a K printed as 1.9e-33 is 2.8e-33 with XLA
  compiling for SSE4.2, a residual 6.9e-16 is 4.8e-16).  The 1e-6: a deterministic float moves by rounding,
  ~1e-13 relative, on another CPU, and a number printed with k digits changes its last digit only when it lies
  that close to a rounding boundary;
- sampler lines (SAMPLER_LINES, by their start): a Markov chain's trajectory depends on every bit of every
  step, so on another CPU the chain is another draw (measured with --xla_cpu_max_isa=SSE4_2 and AVX: NUTS
  masses, R-hat, bulk ESS and tick counts all change). Their numbers are masked: the words, the verdicts
  (True/False) and the count of numbers must still be equal. Their values are checked by the verdict lines
  in EXPECTED here and by the sampler tests (tests/test_nuts.py, test_posterior.py, test_llc.py).
"""
import re
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
RTOL, ATOL = 1e-6, 1e-10


def execute(path: Path, workdir: str) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": workdir}}).execute()
    return nb


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path):
    stored = nbformat.read(path, as_version=4)
    counts = [c.execution_count for c in stored.cells if c.cell_type == "code" and c.source.strip()]
    assert counts == list(range(1, len(counts) + 1)), (
        f"{path.name}: stored execution counts {counts}, not 1..{len(counts)}: run it top to bottom and store it "
        f"(python tests/test_notebooks.py {path.stem})")
    nb = execute(path, str(tmp_path))
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    for line in EXPECTED[path.name]:
        assert line in text, line
    problems = stale_outputs(stored, nb, SAMPLER_LINES.get(path.name, ()))
    assert not problems, (f"{path.name}: the stored outputs are not what it prints now; store the fresh run with "
                          f"python tests/test_notebooks.py {path.stem}\n" + "\n".join(problems))


EXPECTED = {
    "01_landscape_and_fisher.ipynb": ["rank 1 of 2", "excess=0"],
    "02_symmetries_and_phases.ipynb": ["phases: 2 8 34", "Figure 1 reduces to width 0", "Figure 2 pair equivalent: True ;"
                                       " after a small change: False", "-> reversed"],
    "03_regions_and_functional_dimension.ipynb": ["XOR in the box: exact 3  grid 3", "grid  513: 37 of 37 regions",
                                                  "generic (3, 6, 1): 25 of 25", "with a dead neuron: 21"],
    "04_posteriors_and_learning_coefficient.ipynb": ["ends > middle: True", "NUTS within 5 mcse of the grid: True",
                                                     "SGLD within 5 se + 0.03 of the exact value: True"],
}

# lines printed from sampler draws (by their start, after the spaces are normalised): numbers masked
SAMPLER_LINES = {
    "04_posteriors_and_learning_coefficient.ipynb": ("NUTS masses:", "R-hat of L_n", "lockstep:", "async :",
                                                     "SGLD "),
}


def test_every_notebook_has_expectations():
    assert sorted(p.name for p in NOTEBOOKS) == sorted(EXPECTED)
    assert set(SAMPLER_LINES) <= set(EXPECTED)


NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|\b(?:nan|inf)\b")


def cell_outputs(cell) -> tuple[list[str], list[str]]:
    """(the lines of its stdout and text/plain outputs, the MIME types of its rich outputs)."""
    text, kinds = [], []
    for o in cell.get("outputs", []):
        if o.output_type == "stream" and o.name == "stdout":
            text.append(o.text)
        elif o.output_type in ("display_data", "execute_result"):
            text.append(o.data.get("text/plain", "") + "\n")
            kinds.append(o.output_type + ":" + ",".join(sorted(m for m in o.data if m != "text/plain")))
    lines = "".join(text).splitlines()
    return [re.sub(r" +", " ", re.sub(r"\b0x[0-9a-fA-F]{4,}", "0x?", line)).strip() for line in lines], kinds


def same_line(a: str, b: str, sampler: bool) -> bool:
    if NUMBER.split(a) != NUMBER.split(b):                 # the text around the numbers
        return False
    x, y = NUMBER.findall(a), NUMBER.findall(b)
    if sampler:
        return len(x) == len(y)
    return all(abs(float(u) - float(v)) <= RTOL * max(abs(float(u)), abs(float(v))) + ATOL
               if u.lower().lstrip("+-") not in ("nan", "inf") else u == v for u, v in zip(x, y))


def stale_outputs(stored, fresh, sampler_lines=()) -> list[str]:
    """Where stored's outputs differ from fresh's under the module docstring's rules."""
    problems = []
    code = [(k, c) for k, c in enumerate(stored.cells) if c.cell_type == "code"]
    fresh_code = [c for c in fresh.cells if c.cell_type == "code"]
    if len(code) != len(fresh_code):
        return [f"{len(code)} code cells stored, {len(fresh_code)} run"]
    for (k, old), new in zip(code, fresh_code):
        (a, kinds_a), (b, kinds_b) = cell_outputs(old), cell_outputs(new)
        if kinds_a != kinds_b:
            problems.append(f"cell {k}: rich outputs {kinds_a} stored, {kinds_b} now")
        if len(a) != len(b) or not all(same_line(u, v, u.startswith(sampler_lines)) for u, v in zip(a, b)):
            problems.append(f"cell {k}: stored\n    " + "\n    ".join(a) + "\n  now\n    " + "\n    ".join(b))
    return problems


if __name__ == "__main__":                               # store fresh outputs: python tests/test_notebooks.py [NAME ...]
    names = sys.argv[1:]
    for path in [p for p in NOTEBOOKS if not names or p.stem in names or p.name in names]:
        with tempfile.TemporaryDirectory() as workdir:
            nbformat.write(execute(path, workdir), path)
        print("stored", path)
