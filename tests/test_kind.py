"""A new experiment kind, written outside the package in about 50 lines (schema, resolve, run returning its
numbers as a Dataset and a figure, headline), registered, and run from a TOML file by the runner like a
shipped one."""
from typing import Literal

import numpy as np
import pytest
from pydantic import Field

from slt_relu import population_loss, rescale
from slt_relu.workflow import runner
import xarray as xr

from slt_relu.kinds import KINDS, Kind, Output, register_kind
from slt_relu.workflow.schemas import TruthExperiment, resolve_setup
from slt_relu.netcdf import read_tree
from slt_relu.plots._style import subplots
from slt_relu.workflow.settings import Section


class OrbitSettings(Section):
    num: int = Field(5, ge=2, le=1000, description="points along the orbit")
    max_scale: float = Field(4.0, gt=1, description="the orbit's largest factor on node 0")


class Settings(TruthExperiment):
    """Experiment kind ``scaling_orbit``: K along the positive-scaling orbit of node 0 of the truth."""

    kind: Literal["scaling_orbit"]
    orbit: OrbitSettings = OrbitSettings()


def resolve(s: Settings, raw=None):
    return s, resolve_setup(s)


def run(resolved, key, ctx) -> Output:
    s, setup = resolved
    truth = setup.example.truth
    scales = np.geomspace(1 / s.orbit.max_scale, s.orbit.max_scale, s.orbit.num)
    losses = [float(population_loss(rescale(truth, np.r_[a, np.ones(truth.width - 1)]), truth, setup.inputs,
                                    setup.sigma)) for a in scales]
    ds = xr.Dataset({"loss": ("scale", losses)}, coords={"scale": scales})
    return Output({"scales": scales, "loss": losses, "max_loss": float(ds["loss"].max())}, ds)


def figures(resolved, ds) -> dict:
    fig, ax = subplots(figsize=(4, 3))
    ds["loss"].plot.line(ax=ax, xscale="log", marker="o")
    return {"orbit": fig}


def headline(metrics: dict) -> list[str]:
    return [f"max K along the orbit: {metrics['max_loss']:.3g}"]


@pytest.fixture
def orbit_kind():
    kind = register_kind(Kind("scaling_orbit", Settings, resolve, run, headline, description=Settings.__doc__,
                              figures=figures))
    yield kind
    del KINDS["scaling_orbit"]


def test_a_new_kind_runs_from_a_toml_file(orbit_kind, tmp_path):
    config = tmp_path / "orbit.toml"
    config.write_text('kind = "scaling_orbit"\n[truth]\nname = "dslt3_example_3_1"\n[orbit]\nnum = 7\n')
    out = runner.run_config(config, tmp_path / "out", progress=False)
    metrics = runner.json.loads((out / "metrics.json").read_text())
    assert len(metrics["loss"]) == 7 and metrics["max_loss"] < 1e-12      # rescaling is a symmetry: K = 0 by hand
    assert (out / "orbit.png").is_file() and read_tree(out / "results.nc")["loss"].dims == ("scale",)
    assert runner.json.loads((out / "manifest.json").read_text())["kind"] == "scaling_orbit"
    with pytest.raises(runner.ConfigError, match="orbit.max_scale"):
        runner.prepare(config, {"orbit.max_scale": 0.5})


def test_a_kind_whose_schema_names_another_kind_is_refused():
    with pytest.raises(ValueError, match=r"Literal\['other'\]"):
        register_kind(Kind("other", Settings, resolve, run, headline))
