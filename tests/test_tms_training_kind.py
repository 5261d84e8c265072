"""The tms_training kind: the config runs at its tiny size and its numbers are those of
slt_relu.tms.training called directly with the same keys (the kind adds the summaries, the Bayesian side and the
figure, nothing to the measurement: check_the_tiny_run, which test_reference.py calls on the tiny run it compares
with the reference); the asymptotic free energy's preferred phase by hand; bad settings are refused in one line
before anything runs."""
import json
import math
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from slt_relu.netcdf import read_tree
from slt_relu.workflow.settings import ConfigError
from slt_relu.workflow import report, runner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny import TINY  # noqa: E402

TINY_TRAINING = TINY["tms_training.toml"]


def check_the_tiny_run(out):
    """Checks of the tiny run OUT (tests/tiny.py), made by test_reference.py's
    test_shipped_config_runs_tiny[tms_training.toml] on the run it compares with the reference: one test, so that
    the run is paid once (as a test of its own here it was paid again whenever pytest-xdist gave the two
    tests different workers)."""
    from slt_relu.kinds.tms_training_kind import llc_settings
    from slt_relu.tms import training as T
    from slt_relu.tms import training_llc as TL

    m = json.loads((out / "metrics.json").read_text())
    ds = read_tree(out / "results.nc").to_dataset()
    assert {p.name for p in out.glob("*.png")} == {"training.png"}
    assert m["training"]["ns"] == [20, 60] and m["training"]["checkpoint_steps"] == [0, 1, 4, 15, 60]
    s = runner.prepare("tms_training", TINY_TRAINING).settings
    k_train, k_llc = jax.random.split(jax.random.PRNGKey(0))
    direct = T.train_trajectories(k_train, 4, [20, 60], runs=3, steps=60, learning_rate=0.01, init_std=0.1,
                                  checkpoints=5)
    direct = TL.llc_along_training(k_llc, direct, llc_settings(s.llc))
    for v in ("W", "b", "train_loss", "population_loss", "llc", "llc_se"):
        np.testing.assert_array_equal(ds[v].values, direct[v].values)
    assert ds.phase.values.astype(str).tolist() == direct.phase.values.tolist()
    q = TL.quadratic_llc_at_checkpoint(direct, 10.0, 5e-4)
    np.testing.assert_array_equal(ds.llc_quadratic.values, q)
    for i, e in enumerate(m["by_n"]):
        final = direct.phase.values[i, :, -1]
        assert e["final_phases"] == {p: int(np.sum(final == p)) for p in set(final)}
        assert sum(e["final_phases"].values()) == 3 and sum(c["count"] for c in e["sequences"]) == 3
        assert e["final_loss"]["median"] == float(np.median(direct.train_loss.values[i, :, -1]))
        assert e["llc_final"] == pytest.approx(float(direct.llc.values[i, :, -1].mean()), rel=1e-12)
        assert e["n_beta"] == pytest.approx(e["n"] / math.log(e["n"]), rel=1e-15)
        assert sum(q["runs"] for q in e["llc_by_phase"].values()) == 3
    lines = report.headline("tms_training", m)
    assert lines[0].startswith("n = 20: final ") and any(line.startswith("n = 60: final ") for line in lines)


def test_the_asymptotic_free_energy_prefers_by_hand():
    from slt_relu.tms.crossover import bayes_preferred, bayes_sequence

    # F_a = n + log n, F_b = n / 2 + 3 log n: b leads once n / 2 > 2 log n, n > 8.613 (the larger root)
    minima = {"a": (1.0, 1.0), "b": (0.5, 3.0)}
    assert bayes_preferred(minima, 4.0) == "a" and bayes_preferred(minima, 20.0) == "b"
    seq = bayes_sequence(minima, 100.0, points=4000)
    assert [s["phase"] for s in seq] == ["a", "b"] and seq[0]["from_n"] == 2.0
    assert seq[1]["from_n"] == pytest.approx(8.6131, rel=2e-3)


def test_the_c6_minima_and_their_order_along_n():
    """The c = 6 k-gon minima with a first-principles lambda (tests/test_tms_kgon.py checks the table) and the
    6-gon taking the lead from the 5-gon - where n (L_5- - L_6) = (8.5 - 7) log n, near n = 445."""
    from slt_relu.tms.crossover import bayes_preferred, kgon_minima

    minima = kgon_minima(6)
    assert sorted(minima) == ["1-gon -----", "2-gon ----", "3-gon ---", "4-gon --", "5-gon +", "5-gon -", "6-gon"]
    assert minima["6-gon"][1] == 8.5 and minima["5-gon -"][1] == 7.0
    assert bayes_preferred(minima, 430.0) == "5-gon -" and bayes_preferred(minima, 460.0) == "6-gon"


@pytest.mark.parametrize("overrides, match", [
    ({"training.ns": [400, 100]}, r"^training\.ns: expected increasing sample sizes, got \[400, 100\]$"),
    ({"training.ns": [1]}, r"^training\.ns: expected a non-empty list of integers in \[2, 1000000\], got \[1\]$"),
    ({"training.batch_size": 200}, r"^training\.batch_size: expected 0 \(full batch\) or at most the smallest n = "
                                   r"100, got 200$"),
    ({"training.c": 11}, r"^training\.c: expected an integer in \[2, 10\], got 11$"),
    ({"training.runs": 0}, r"^training\.runs: "),
    ({"training.optimizer": "rmsprop"}, r"^training\.optimizer: "),
    ({"training.learning_rate": 0.0}, r"^training\.learning_rate: "),
    ({"training.checkpoints": 1}, r"^training\.checkpoints: "),
    ({"training.step": 10}, r"^training\.step: "),
    ({"llc.num_burnin": 2000}, r"^llc: num_burnin: expected an integer below num_steps = 2000, got 2000$|^llc"),
    ({"llc.n_beta": 3.0}, r"^llc\.n_beta: expected no value \(n beta = n / log n at each n\), got 3\.0$"),
    ({"llc.batch_size": 10}, r"^llc\.batch_size: expected no value"),
    ({"llc.step_size": 2.0}, r"^llc\.step_size: "),
    ({"dtype": "float32"}, r"^dtype: expected 'float64' for kind 'tms_training'"),
])
def test_bad_settings_are_refused_in_one_line(tmp_path, overrides, match):
    with pytest.raises(ConfigError, match=match) as err:
        runner.run_config("tms_training", tmp_path / "res", progress=False, overrides=overrides)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "res").exists()
    jax.config.update("jax_enable_x64", True)


def test_memory_is_checked_before_anything_runs(tmp_path):
    from slt_relu.workflow import memory
    from slt_relu.workflow.config import load
    from slt_relu.workflow.kind import kinds
    from slt_relu.workflow.settings import parse

    # parsed only (runner.prepare would check it against this machine's memory, which the test must not depend on)
    overrides = {"llc.num_chains": 64, "llc.num_steps": 1_000_000, "llc.thin": 1}
    s = parse(kinds()["tms_training"].settings, load(runner.config_path("tms_training"), overrides))
    with pytest.raises(ConfigError, match=r"^llc\.num_chains, llc\.num_steps, llc\.num_burnin, llc\.thin: one "
                                          r"checkpoint's kept SGLD draws needs ~") as err:
        memory.check(s, available=2 ** 30)
    assert "\n" not in str(err.value)
    memory.check(runner.prepare("tms_training", {}).settings, available=2 ** 30)     # the shipped config fits 1 GiB
