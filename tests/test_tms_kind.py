"""The tms kind: the config runs at its tiny size, its metrics carry the exact k-gon table of slt_relu.tms.kgon_table
number for number and lambda +- se for the estimated k-gons (check_the_tiny_run, which test_reference.py calls on
the tiny run it compares with the reference), the local potential keeps the region's promises (rotation pinned,
negative unused biases folded, a wall outside the ball), and bad settings are refused in one line before anything
runs."""
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt_relu.netcdf import read_tree
from slt_relu.workflow.settings import ConfigError
from slt_relu.workflow import runner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny import TINY  # noqa: E402

TINY_TMS = TINY["tms_kgons.toml"]
ROW_TYPES = {"c": int, "k": int, "variant": str, "n_positive": int, "length": float, "bias": float, "loss": float,
             "loss_formula": float, "grad_norm": float, "kind": str, "smooth": bool, "hessian": dict,
             "fisher_rank": int, "lambda_rule": str, "note": str}


def check_the_tiny_run(out):
    """Checks of the tiny run OUT (tests/tiny.py), made by test_reference.py's
    test_shipped_config_runs_tiny[tms_kgons.toml] on the run it compares with the reference: one test, so that
    the run is paid once (as a test of its own here it was paid again whenever pytest-xdist gave the two
    tests different workers)."""
    from slt_relu.tms import kgon_table

    metrics = json.loads((out / "metrics.json").read_text())
    rows = metrics["kgons"]
    table = kgon_table((5,))
    assert [(r["c"], r["k"], r["variant"]) for r in rows] == [(t.c, t.k, t.variant) for t in table]
    for row, rec in zip(rows, table):
        for key, typ in ROW_TYPES.items():
            assert isinstance(row[key], typ), (key, row[key])
        # the exact numbers are kgon_table's (same machine, same program: equal to the last bit)
        assert (row["length"], row["bias"], row["loss"], row["grad_norm"]) == (rec.length, rec.bias, rec.loss,
                                                                                rec.grad_norm)
        assert row["loss_formula"] == pytest.approx(rec.loss, rel=1e-12, abs=1e-15)
        assert (row["kind"], row["fisher_rank"], row["lambda_exact"], row["lambda_rule"]) == \
            (rec.kind, rec.fisher_rank, rec.lambda_, rec.lambda_rule)
        assert row["hessian"] == {"positive": rec.hessian_positive, "zero": rec.hessian_zero,
                                  "negative": rec.hessian_negative}
    estimated = [r for r in rows if r["lambda"] is not None]
    # the default selection: the minima at estimate.c with k >= 4: the 4-gon "-" (sandwich) and the 5-gon
    assert [(r["k"], r["variant"]) for r in estimated] == [(4, "-"), (5, "")]
    for r in estimated:
        assert isinstance(r["lambda"], float) and isinstance(r["lambda_se"], float) and r["lambda_se"] > 0
        assert isinstance(r["lambda_exact"], float)
        assert r["verdict"].startswith(("agrees", "differs"))
        assert r["fit"]["t_range"] == pytest.approx([1e4, 1e6], rel=1e-9)
        assert r["fit"]["num_params"] == 14 and r["fit"]["pinned"] == "W[1,0]"
        assert r["fit"]["region_min_loss"] >= -1e-10
        assert 2 < r["lambda"] < 12                     # t = 1e6 is far from asymptotic at this prior: a loose check
    assert estimated[0]["fit"]["folded"] == ["b[4]"] and estimated[1]["fit"]["folded"] == []
    assert all(r["lambda"] is None and r["lambda_se"] is None for r in rows if r not in estimated)
    ds = read_tree(out / "results.nc").to_dataset()
    assert ds.sizes["row"] == len(rows) and ds.sizes["estimated"] == 2 and ds.sizes["run"] == 2
    np.testing.assert_array_equal(ds["loss"].values, [t.loss for t in table])
    assert {p.name for p in out.glob("*.png")} == {"kgons.png", "lambda.png", "loss_landscape.png"}
    from slt_relu.workflow import report

    lines = report.headline("tms", metrics)
    assert lines[0].startswith("c = 5 minima, exact L: 3-gon -- 0.1333 (l 1.000, b 0.000)")
    assert "5-gon 0.01583 (l 1.170, b -0.2823)" in lines[0]
    assert lines[1].startswith("c = 5 4-gon -: lambda ") and "first principles 6.5 (sandwich)" in lines[1]


def _local(c, k, n_pos=0, radius=0.25):
    from slt_relu.tms.local_lambda import LocalKGonLoss, local_data
    from slt_relu.tms import refined_kgon

    p = refined_kgon(c, k, n_pos)
    return p, LocalKGonLoss(c), local_data(p, radius)


def test_the_local_potential_pins_the_rotation_folds_negative_unused_biases_and_walls_the_ball():
    from slt_relu.tms.local_lambda import WALL
    from slt_relu.tms import population_loss, rotate, rotation, to_flat

    p, loss, data = _local(6, 5)                             # 5-gon "-": b[5] = -1/12 folded
    assert data["fold"][0].tolist() == [0.0] * 17 + [1.0]
    v = jnp.zeros(17)
    assert float(loss(v, data)) == 0.0
    # v leaves out W[1, 0] (flat index c = 6): v[6] is W[1, 1]
    w = np.asarray(to_flat(p)).copy()
    w[7] += 0.01
    dv = np.zeros(17)
    dv[6] = 0.01
    assert float(loss(jnp.asarray(dv), data)) == pytest.approx(float(population_loss(type(p)(
        jnp.asarray(w[:12].reshape(2, 6)), jnp.asarray(w[12:])))) - float(data["loss_star"][0]), rel=1e-12)
    # the folded bias: +0.2 reads as -0.2 (b_u = -1/12 - 0.2 < 0), where L does not depend on it; unfolded,
    # b_u = -1/12 + 0.2 > 0 lowers L (towards the "+" variant)
    up = np.zeros(17)
    up[-1] = 0.2
    assert float(loss(jnp.asarray(up), data)) == pytest.approx(0.0, abs=1e-16)
    q = type(p)(p.W, p.b.at[5].add(0.2))
    assert float(population_loss(q)) < float(data["loss_star"][0]) - 1e-4
    out = np.zeros(17)
    out[0] = 0.3                                             # |v| > radius = 0.25
    assert float(loss(jnp.asarray(out), data)) == WALL
    # the rotation is an exact symmetry of L, so the slice W[1, 0] = 0 loses nothing: the rotated 5-gon has the
    # same loss
    assert float(population_loss(rotate(p, rotation(0.3)))) == pytest.approx(float(data["loss_star"][0]), rel=1e-12)


def test_no_lower_loss_in_the_region_of_a_minimum_and_one_where_the_fold_is_off():
    """The region check (projected gradient descent inside the ball) finds nothing below L* at the 5-gon "-" of
    c = 6, and finds the "+" direction's lower loss once the unused bias is not folded."""
    from slt_relu.tms.local_lambda import region_min

    p, loss, data = _local(6, 5)
    assert float(region_min(loss, data, jax.random.key(0))) >= -1e-12
    unfolded = {**data, "fold": jnp.zeros_like(data["fold"])}
    assert float(region_min(loss, unfolded, jax.random.key(0))) < -1e-4


def test_the_verdict():
    from slt_relu.tms.local_lambda import verdict

    assert verdict(7.03, 0.02, 7.0)[0].startswith("agrees (+0.03 = +1.5 se")
    assert verdict(7.3, 0.02, 7.0)[0].startswith("differs")
    assert verdict(7.3, 0.02, None) == ("no first-principles value", None)


@pytest.mark.parametrize("overrides, match", [
    ({"estimate.c": [7]}, r"^estimate\.c: expected values of table\.c \[4, 5, 6, 8\], got 7$"),
    ({"estimate.kgons": [{"c": 6, "k": 7}]}, r"^estimate\.kgons\[0\]\.k: expected 1 <= k <= c = 6, got 7$"),
    ({"estimate.kgons": [{"c": 6, "k": 5, "variant": "+-"}]},
     r"^estimate\.kgons\[0\]\.variant: expected c - k = 1 signs"),
    ({"estimate.kgons": [{"c": 7, "k": 5, "variant": "--"}]}, r"^estimate\.kgons\[0\]\.c: expected one of table\.c"),
    ({"estimate.kgons": [{"c": 6, "k": 4, "variant": "-+"}]}, r"^estimate\.kgons\[0\]\.variant: "),
    ({"dtype": "float32"}, r"^dtype: expected 'float64' for kind 'tms'"),
    ({"estimate.t_max": 100.0}, r"^estimate\.decades: expected a window above t = 1"),
    ({"estimate.runs": 1}, r"^estimate\.runs: "),
    ({"estimate.prior": 1.0}, r"^estimate\.prior: "),
    ({"table.c": [11]}, r"^table\.c: expected a non-empty list of integers in \[2, 10\], got \[11\]$"),
    ({"estimate.estimator": "wbic"}, r"^estimate\.estimator: "),
])
def test_bad_settings_are_refused_in_one_line(tmp_path, overrides, match):
    with pytest.raises(ConfigError, match=match) as err:
        runner.run_config("tms_kgons", tmp_path / "res", progress=False, overrides=overrides)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "res").exists()
    jax.config.update("jax_enable_x64", True)


def test_a_saddle_asked_for_is_refused(tmp_path):
    """estimate.kgons may name minima and numerical minima of the table only: the 2-gon "+-" of c = 4 is a saddle."""
    overrides = {"table.c": [4], "estimate.c": [], "estimate.kgons": [{"c": 4, "k": 2, "variant": "+-"}]}
    with pytest.raises(ConfigError, match=r"^estimate\.kgons\[0\]: the 2-gon '\+-' of c = 4 is a saddle"):
        runner.run_config("tms_kgons", tmp_path / "res", progress=False, overrides=overrides)
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize("kwargs, match", [
    ({"prior_std": -0.1}, "prior_std: expected a positive finite number"),
    ({"radius": 0.0}, "radius: expected a positive finite number"),
    ({"runs": 1}, "runs: expected an integer >= 2"),
    ({"estimator": "slope"}, "estimator: expected one of"),
])
def test_the_library_estimate_refuses_bad_settings_in_one_line(kwargs, match):
    """slt_relu.tms.local_lambda.kgon_lambda (the kind's estimate, on plain arguments) checks them before it runs."""
    from slt_relu.sampling import SMCSettings
    from slt_relu.tms import refined_kgon
    from slt_relu.tms.local_lambda import kgon_lambda

    args = {"prior_std": 0.02, "radius": 0.25, "t_max": 1e6, "decades": 2.0, "runs": 2, **kwargs}
    with pytest.raises(ValueError, match=f"^{match}") as err:
        kgon_lambda(jax.random.key(0), refined_kgon(5, 4, 0), SMCSettings(), **args)
    assert "\n" not in str(err.value)
