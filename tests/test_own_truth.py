"""A researcher's own truth in a config (slt_relu.workflow.truth_sources): inline parameters or a function in their
Python file, run by the landscape and posterior kinds; the same truth written three ways gives the same numbers;
every mistake is one line naming the key, with no folder written and nothing written beside the user's file."""
import json
import math
import textwrap
from pathlib import Path

import numpy as np
import pytest

from slt_relu.netcdf import read_tree
from slt_relu.truths import dslt4_pt1
from slt_relu.workflow import cli

T = 1.2
PT1 = dslt4_pt1(T)                      # w = (+-cos t, sin t), b = -0.3, q = 1, c = 0

LANDSCAPE = """kind = "landscape"
{truth}
[landscape]
loss = "population"
axes = ["w[0,0]", "w[1,1]"]
ranges = [[-1.0, 1.0], [0.0, 2.0]]
resolution = 9
fisher_points = 0
"""
POSTERIOR = """kind = "posterior"
{truth}
[posterior]
n = 100
datasets = 2
[sampler]
name = "nuts"
num_warmup = 30
num_samples = 20
"""
REGISTERED = f'[truth]\nname = "dslt4_pt1"\nt = {T!r}\n'
INLINE = (f"[truth]\nw = {np.asarray(PT1.w).tolist()!r}\nb = {np.asarray(PT1.b).tolist()!r}\n"
          f"q = {np.asarray(PT1.q).tolist()!r}\nc = 0.0\n")
FILE = '[truth]\nname = "truths/pt1.py:pt1"\nt = {t!r}\n'.format(t=T)
TRUTH_FILE = '''
import math

def pt1(t: float = 1.0):
    """DSLT4's PT1 truth, written by hand: w = (+-cos t, sin t), b = -0.3, q = 1, c = 0."""
    return {"w": [[math.cos(t), math.sin(t)], [-math.cos(t), math.sin(t)]], "b": -0.3, "q": 1.0, "c": 0.0}

def broken(t: float = 1.0):
    raise RuntimeError("no truth today")

def not_a_truth():
    return 3.0

def three_inputs():
    return {"w": [[1.0, 0.0, 0.5]], "b": 0.0, "q": 1.0}

def ragged():
    return {"w": [[1.0, 0.0], [1.0]], "b": 0.0, "q": 1.0}
'''


def _setup(tmp_path: Path, text: str) -> Path:
    (tmp_path / "truths").mkdir(exist_ok=True)
    (tmp_path / "truths" / "pt1.py").write_text(textwrap.dedent(TRUTH_FILE))
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def _run(tmp_path, text, name, monkeypatch=None) -> Path:
    path = _setup(tmp_path, text)
    out = tmp_path / name
    assert cli.main(["run", str(path), "--out", str(out), "--no-progress", "--no-cache"]) == 0
    return out


def test_landscape_of_an_inline_and_a_file_truth_is_the_registered_examples(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path.parent)       # the truth file is found from the config's folder, not the working one
    grids = {}
    for name, truth in (("registered", REGISTERED), ("inline", INLINE), ("file", FILE)):
        out = _run(tmp_path, LANDSCAPE.format(truth=truth), name)
        grids[name] = read_tree(out / "results.nc").to_dataset()["loss"].values
    assert grids["registered"].shape == (9, 9) and np.isfinite(grids["registered"]).all()
    # the same truth and model: the same deterministic program, so equal up to the rounding of cos t written in
    # decimal (repr round-trips a float exactly: the inline w is PT1's w to the bit)
    for name in ("inline", "file"):
        np.testing.assert_allclose(grids[name], grids["registered"], rtol=1e-12, atol=1e-15)
    manifest = json.loads((tmp_path / "file" / "manifest.json").read_text())
    assert manifest["truth"]["w"] == [[math.cos(T), math.sin(T)], [-math.cos(T), math.sin(T)]]
    assert manifest["resolved"]["truth"] == {"name": "truths/pt1.py:pt1", "width": None, "t": T}
    assert not list(tmp_path.rglob("__pycache__"))           # nothing written beside the user's file


def test_posterior_of_a_file_truth_with_a_sweep_over_its_argument(tmp_path):
    text = POSTERIOR.format(truth=FILE + "width = 3\n") + "[sweep]\ntruth.t = [1.0, 1.2]\n"
    out = _run(tmp_path, text, "file")
    ds = read_tree(out / "results.nc")
    metrics = json.loads((out / "metrics.json").read_text())
    assert [p["values"]["truth.t"] for p in metrics["points"]] == [1.0, 1.2]
    assert (out / "effective_weights.png").exists()
    # the model has width 3: the truth's 2 nodes and a node that starts at zero
    draws = read_tree(next((out / "draws").glob("*.nc")))["posterior"].dataset
    assert draws.sizes["node"] == 3 and draws["w"].sizes["input"] == 2
    assert ds is not None
    # and the registered example's posterior at t = 1.2 (width 2) is the file's at width 2, draw for draw
    reg = _run(tmp_path, POSTERIOR.format(truth=REGISTERED), "registered")
    own = _run(tmp_path, POSTERIOR.format(truth=FILE), "own")
    masses = lambda folder: json.loads((folder / "metrics.json").read_text())["points"][0]["mass"]
    assert masses(own) == masses(reg)


@pytest.mark.parametrize("truth, message", [
    ('[truth]\nname = "truths/none.py:pt1"\n', "truth.name: no Python file 'truths/none.py' (read relative to"),
    ('[truth]\nname = "truths/pt1.py:missing"\n', "truth.name: truths/pt1.py has no function 'missing'"),
    ('[truth]\nname = "truths/pt1.py:broken"\n', "truth.name: truths/pt1.py:broken raised RuntimeError: no truth today"),
    ('[truth]\nname = "truths/pt1.py:not_a_truth"\n', "returned float; expected a TwoLayer or a table with w, b, q, c"),
    ('[truth]\nname = "truths/pt1.py:ragged"\n', "w: expected numbers in an array of shape (m, n_in)"),
    ('[truth]\nname = "truths/pt1.py:pt1"\ns = 1.0\n', "truth: the options ['s'] do not fit truths/pt1.py:pt1"),
    ('[truth]\nname = "no_such_module_xyz:f"\n', "truth.name: cannot import module 'no_such_module_xyz'"),
    ('[truth]\nname = "truths/pt1.py:"\n', "truth.name: expected 'path/to/file.py:function' or"),
    ('[truth]\nname = "truths/pt1.py:pt1"\nwidth = 1\n', "truth.width: expected at least the truth's 2 nodes, got 1"),
    ("[truth]\nw = [[1.0, 0.0], [0.0, 1.0]]\nb = [0.1, 0.2, 0.3]\n", "truth.b: expected shape (2,) to match w's 2 nodes"),
    ('[truth]\nname = "truths/pt1.py:three_inputs"\n', "w: expected shape (m, n_in) with m in [1, 256] and n_in 1 or 2"),
    ("[truth]\nw = [[1.0, 0.0], [0.0]]\n", "truth.w: expected numbers in an array of shape (m, n_in)"),
    ("[truth]\nw = [[1e9, 0.0]]\n", "truth.w[0]: expected numbers 0 or of magnitude in [0.0001, 10000.0], got 1000000000.0"),
    ("[truth]\nw = [[1.0, 0.0]]\nq = nan\n", "truth.q"),
    ("[truth]\nw = [[1.0, 0.0]]\nt = 1.0\n", "truth.t: unknown key; expected one of b, c, name, q, w, width"),
    ('[truth]\nname = "nope"\n', "truth.name: expected one of 'dslt3_example_3_1',"),
    ("[truth]\nb = 1.0\n", "truth: missing name; expected a registered example's name, 'file.py:function', or w"),
])
def test_a_bad_own_truth_is_one_line_and_no_folder(tmp_path, capsys, truth, message):
    path = _setup(tmp_path, LANDSCAPE.format(truth=truth))
    out = tmp_path / "out"
    code = cli.main(["run", str(path), "--out", str(out), "--no-progress", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".out*"))
    assert not list(tmp_path.rglob("__pycache__"))


@pytest.mark.parametrize("truth, options", [("truths/pt1.py:pt1", {"t": T}), ("inline", {
    "w": np.asarray(PT1.w).tolist(), "b": np.asarray(PT1.b).tolist(), "q": 1.0, "c": 0.0})])
def test_the_case_kinds_take_an_own_truth_as_the_registered_example(tmp_path, truth, options):
    """The learning_coefficient kind's two_layer cases and lambda_curve's dslt_phase cases name a truth and its
    options: an own truth there resolves to the registered example's truth, parameter for parameter."""
    from slt_relu.workflow import runner
    from slt_relu.workflow.schemas import case_example

    config = _setup(tmp_path, "")
    with runner.config_folder(config.parent):
        own = case_example(truth, options, "cases[0]").truth
    for a, b in zip(own, PT1):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for kind, case in (("learning_coefficient", {"name": "own", "model": "two_layer", "truth": truth,
                                                 "truth_options": options, "width": 2, "at": "phases"}),
                       ("lambda_curve", {"name": "own", "family": "dslt_phase", "truth": truth, "truth_options": options,
                                         "width": 2, "phase": "+ +", "radius": 0.75})):
        name = {"learning_coefficient": "llc_dslt4_phases", "lambda_curve": "lambda_per_phase"}[kind]
        path = tmp_path / f"{kind}.toml"
        path.write_text((Path(runner.EXPERIMENTS_DIR) / f"{name}.toml").read_text())
        prep = runner.prepare(path, {"cases": [case]})          # resolved: the truth read from the config's folder
        assert prep.settings.kind == kind and prep.settings.cases[0].truth == truth


def test_an_own_truth_in_a_case_names_the_case_key(tmp_path):
    path = _setup(tmp_path, "")
    from slt_relu.workflow import runner
    from slt_relu.workflow.settings import ConfigError

    (tmp_path / "c.toml").write_text((Path(runner.EXPERIMENTS_DIR) / "llc_dslt4_phases.toml").read_text())
    case = {"name": "own", "model": "two_layer", "truth": "truths/pt1.py:pt1", "truth_options": {"s": 1.0}}
    with pytest.raises(ConfigError, match=r"^cases\[0\]\.truth: the options \['s'\] do not fit") as err:
        runner.prepare(tmp_path / "c.toml", {"cases": [case]})
    assert "\n" not in str(err.value) and path.exists()
