"""A run whose arrays cannot fit in this machine's memory is refused before anything is built, with one line
naming the keys that size them and the estimate (slt_relu.workflow.memory); every shipped config fits."""
import jax
import pytest

from slt_relu.workflow import cli, memory, runner
from slt_relu.workflow.config import ConfigError
from test_cli import GOOD, ROOT
from tiny import TINY


@pytest.fixture(autouse=True)
def _x64_back_on():
    """runner.prepare sets the config's dtype for the run that follows; these tests run nothing after it."""
    yield
    jax.config.update("jax_enable_x64", True)


def test_every_shipped_config_fits_and_has_an_estimate_where_it_can_be_large():
    for path in runner.shipped_configs():
        settings = runner.prepare(path).settings
        memory.check(settings)
        if settings.kind != "symmetry":                   # widths <= 8 by its schema
            assert memory.needs(settings), path.name


def test_estimates_count_the_arrays_by_hand():
    s = runner.prepare(ROOT / "experiments" / "dslt4_pt1_node_degeneracy.toml", TINY["dslt4_pt1_node_degeneracy.toml"]
                       ).settings
    needs = {n.what: n.elements for n in memory.needs(s)}
    # 2 data sets x 200 points x (2 inputs + y); 2 x 1 chains x 40 kept draws x D = 2 (2 + 2) + 1 = 9
    assert needs["the data sets of one sweep point"] == 2 * 200 * 3
    assert needs["the kept draws of one sweep point"] == 2 * 1 * 40 * 9
    assert memory.params(3, 2) == 13 and memory.human(8.0e12) == "8.0 TB" and memory.human(999) == "999 B"


def test_check_names_the_keys_and_the_estimate():
    s = runner.prepare(ROOT / "experiments" / "dslt4_pt1_smc.toml", TINY["dslt4_pt1_smc.toml"]).settings
    largest = max(memory.needs(s), key=lambda n: n.elements)
    memory.check(s, available=int(largest.elements * 4) + 1)         # float32: 4 bytes an element
    with pytest.raises(ConfigError, match=rf"^{largest.keys}: {largest.what} needs ~[0-9.]+ [kMGT]?B at least; "
                                          r"this machine has [0-9.]+ [kMGT]?B available$"):
        memory.check(s, available=int(largest.elements * 4) - 1)


@pytest.mark.parametrize("config,overrides,message", [
    ("dslt3_degenerate_node.toml", {"landscape.loss": "empirical", "landscape.n": 10**12}, "landscape.n: "),
    ("dslt4_pt1_node_degeneracy.toml", {"posterior.datasets": 100_000, "posterior.n": 10_000_000},
     "posterior.n, posterior.datasets: the data sets of one sweep point needs ~"),
    ("dslt4_pt1_node_degeneracy.toml", {"sampler.num_samples": 10**12}, "sampler.num_samples, posterior.datasets"),
    ("dslt4_pt1_smc.toml", {"sampler.num_particles": 10**12}, "sampler.num_particles, posterior.datasets"),
    ("llc_known_values.toml", {"llc.sgld.num_steps": 10**13, "llc.sgld.thin": 1}, "llc.sgld.num_chains, llc.sgld.num_steps"),
    ("functional_dimension_depth_width.toml", {"functional_dimension.n_in": [100_000]}, "functional_dimension.n_in"),
    ("linear_regions_xor.toml", {"regions.resolution": 2001, "regions.lines.widths": [10**9]}, "regions."),
    ("fisher_rank_survey.toml", {"inputs.cells": 2048, "inputs.order": 16, "fisher.points[0].widths": [256]},
     "fisher.points[0]"),
    # 64 t x 256 chains x 1e5 draws x 27 parameters (the deep linear network 3-3-3-3): 44 G floats, 0.35 TB
    ("known_lambda_suite.toml", {"mcmc.temperatures": 64, "mcmc.chains": 256, "mcmc.num_samples": 100_000},
     "mcmc.temperatures, mcmc.chains, mcmc.num_samples, cases: the kept NUTS draws of the largest case (27 parameters)"),
    # 64 t x 256 chains x 1e6 steps x 27 parameters: 4.4e11 floats, 3.5 TB
    ("known_lambda_suite.toml", {"sgld.temperatures": 64, "sgld.chains": 256, "sgld.num_steps": 1_000_000},
     "sgld.temperatures, sgld.chains, sgld.num_steps, sgld.pilot_steps, cases: the SGLD chains' steps of the largest "
     "case (27 parameters), pilots included"),
])
def test_runs_that_cannot_fit_are_refused_before_anything_starts(tmp_path, capsys, config, overrides, message):
    import json
    sets = sum((["--set", f"{k}={json.dumps(v)}"] for k, v in overrides.items()), [])
    code = cli.main(["run", str(ROOT / "experiments" / config), "--out", str(tmp_path / "o"), "--no-progress",
                     "--no-cache"] + sets)
    err = capsys.readouterr().err
    assert code == 2 and message in err and "this machine has" in err and err.count("\n") == 1, err
    assert not list(tmp_path.iterdir())


def test_an_m_symmetric_truth_has_a_bounded_size(tmp_path, capsys):
    path = tmp_path / "cfg.toml"
    path.write_text(GOOD.replace('name = "dslt3_example_3_4"', 'name = "m_symmetric"\nm = 1000000'))
    assert cli.main(["run", str(path), "--out", str(tmp_path / "o"), "--no-progress", "--no-cache"]) == 2
    assert "truth.m: expected an integer in [1, 256], got 1000000" in capsys.readouterr().err
