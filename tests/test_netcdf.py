"""netCDF files: a point's result round-trips through a checkpoint file, names are kept, dimensions are named,
half-written files of dead processes are removed and those of live ones kept."""
import json
import os
import socket

import numpy as np

from slt_relu.workflow import sweep
from slt_relu.netcdf import from_tree, read_tree, to_tree, write_tree


def test_a_result_round_trips_with_named_dimensions(tmp_path):
    result = {"flat": np.arange(24, dtype=np.float32).reshape(2, 3, 4), "dataset": np.array([0, 1]),
              "stats": {"accept": np.full((2, 3), 0.5)},                      # a group, no key prefix
              "convergence": {"converged": False, "runs_needed": None, "mass_mcse": {"a": 0.01, "b": float("nan")}},
              "program_ticks": np.int64(7), "name": "a / b %2F",
              "rows": [{"label": "x/y", "trace": np.ones(3)}, {"label": "z", "trace": np.zeros(5)}],
              "traces": {"pi/2 sgld": np.ones(2), "loss": np.arange(4.0)}, "loss": np.arange(6.0).reshape(2, 3)}
    dims = {"flat": ("chain", "draw", "parameter"), "loss": ("chain", "draw"), "dataset": ("chain",)}
    path = write_tree(to_tree(result, dims), tmp_path / "point.nc")
    tree = read_tree(path)
    assert tree["flat"].dims == ("chain", "draw", "parameter") and tree["stats"]["accept"].shape == (2, 3)
    back = from_tree(tree)
    assert set(back) == set(result)
    np.testing.assert_array_equal(back["flat"], result["flat"])
    assert back["flat"].dtype == np.float32 and back["program_ticks"] == 7 and back["name"] == "a / b %2F"
    assert back["convergence"]["runs_needed"] is None and np.isnan(back["convergence"]["mass_mcse"]["b"])
    assert [r["label"] for r in back["rows"]] == ["x/y", "z"] and back["rows"][1]["trace"].shape == (5,)
    assert set(back["traces"]) == {"pi/2 sgld", "loss"}                      # a group's loss is not the root's
    assert not list(tmp_path.glob("*.tmp-*"))


def test_a_checkpoint_of_another_config_is_not_read(tmp_path):
    path = tmp_path / "point-00000.nc"
    sweep.save_result(path, "abc", {"x": np.ones(3)})
    assert sweep.load_result(path, "abc")["x"].tolist() == [1.0, 1.0, 1.0]
    assert sweep.load_result(path, "other") is None and sweep.load_result(tmp_path / "none.nc", "abc") is None
    (tmp_path / "bad.nc").write_text("not netCDF")
    assert sweep.load_result(tmp_path / "bad.nc", "abc") is None


def test_half_written_files_of_dead_processes_are_removed(tmp_path):
    host = socket.gethostname()
    dead = 2**22 + 12345                                   # above the default pid_max: no such process
    live = tmp_path / f"point-00001.nc.tmp-{host}-{os.getpid()}"
    gone = tmp_path / f"point-00002.nc.tmp-{host}-{dead}"
    other_host = tmp_path / f"point-00003.nc.tmp-elsewhere-{dead}"
    for f in (live, gone, other_host):
        f.write_text(json.dumps("partial"))
    sweep.remove_temporary(tmp_path)
    assert live.exists() and not gone.exists() and other_host.exists()    # another host's process: not ours to judge
