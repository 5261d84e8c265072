"""The network_landscape kind: each shipped config's tiny run (tests/tiny.py; check_the_tiny_run, which
test_reference.py calls on the run it compares with the reference, so that the run is paid once) against independent computations of the same numbers from the same network (rebuilt from the config):
the loss at the grid's centre and along a direction (``slt_relu.landscape.slice_1d``), the Hessian's top eigenvalues
and trace against the dense Hessian (``slt_relu.hessian.hessian_spectrum``), the exact region count against a fine
grid's (a lower bound), the digits' slice through its three images; and bad settings refused in one line naming the
key before anything runs."""
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt_relu.netcdf import read_tree
from slt_relu.workflow import report, runner
from slt_relu.workflow.settings import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny import TINY  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RTOL = {"float64": 1e-10, "float32": 1e-5}


def check_the_tiny_run(out):
    """The checks of the tiny run OUT of one of the three shipped configs, by the config file's name (its manifest)."""
    name = Path(json.loads((out / "manifest.json").read_text())["config_path"]).stem
    {"network_landscape_truth": check_the_truths_network, "network_landscape_digits": check_the_digits_network,
     "network_landscape_tms": check_the_tms_network}[name](out)


def _run(name, out):
    """(metrics, Dataset, Network rebuilt from the config with the run's key, resolved) of config NAME's tiny run OUT."""
    from slt_relu.kinds.network_landscape_networks import build

    metrics = json.loads((out / "metrics.json").read_text())
    ds = read_tree(out / "results.nc").to_dataset()
    prep = runner.prepare(ROOT / "experiments" / f"{name}.toml", TINY[f"{name}.toml"])
    net = build(prep.resolved, jax.random.split(jax.random.PRNGKey(prep.settings.seed), 5)[0])
    return out, metrics, ds, net, prep.resolved


def _common(out, metrics, ds, net):
    """The checks every tiny run passes: the point, the centre, a line, the metrics read off the Dataset, the
    figures."""
    from slt_relu.landscape import slice_1d
    from slt_relu.kinds.network_landscape import metrics as metrics_of

    rtol = RTOL[ds.attrs["dtype"]]
    point = net.model.unravel(jnp.asarray(ds["point"].values))
    np.testing.assert_array_equal(ds["point"].values, np.asarray(net.model.ravel(net.params)))   # the same network
    R = ds.sizes["x"]
    center = float(net.loss_fn(point, net.data))
    assert float(ds["loss"][R // 2, R // 2]) == pytest.approx(center, rel=rtol)
    assert float(ds["loss_center"]) == pytest.approx(center, rel=rtol)
    u = net.model.unravel(jnp.asarray(ds["direction_vector"].sel(direction="u").values))
    line = np.asarray(slice_1d(net.loss_fn, point, net.data, u, ds["t"].values, chunk=1))
    np.testing.assert_allclose(ds["line_loss"].sel(direction="u").values, line, rtol=rtol)
    # the grid's row through the centre is the same line at the grid's offsets
    np.testing.assert_allclose(ds["loss"].values[:, R // 2], slice_1d(net.loss_fn, point, net.data, u, ds["x"].values),
                               rtol=rtol)
    assert metrics == json.loads(json.dumps(metrics_of(ds)))
    assert metrics["loss_min_on_grid"] <= metrics["loss_at_center"] * (1 + rtol) <= metrics["loss_max_on_grid"]
    pngs = {p.name for p in out.glob("*.png")}
    assert pngs == {"landscape.png", "hessian_density.png"} | ({"regions.png"} if "region_count" in ds else set())
    density, grid = ds["density"].values, ds["eigenvalue_grid"].values
    assert np.all(density >= 0) and np.sum(density) * (grid[1] - grid[0]) == pytest.approx(1.0, rel=1e-3)
    np.testing.assert_allclose(ds["slq_weight"].values.sum(1), 1.0, rtol=1e-9)
    lines = report.headline("network_landscape", metrics)
    assert lines[0].startswith(metrics["network"]) and "top eigenvalues" in lines[1]
    return point


def _dense(net, point):
    from slt_relu.hessian import hessian_spectrum

    return hessian_spectrum(net.loss_fn, point, net.data)


def _grid_count(mlp, origin, u, v, half_width, resolution=301):
    """Distinct activation patterns on a resolution^2 grid of the slice origin + s u + t v: a lower bound."""
    from slt_relu.mlp import activation_patterns
    from slt_relu.regions import distinct_patterns

    g = np.linspace(-half_width, half_width, resolution)
    S, T = (a.reshape(-1, 1) for a in np.meshgrid(g, g))
    x = jnp.asarray(origin + S * u + T * v)
    return distinct_patterns(np.asarray(activation_patterns(mlp, x)))[0]


def _regions(ds, mlp):
    """The regions' checks: a fine grid counts no more; each polygon's centroid has the region's pattern."""
    from slt_relu.mlp import activation_patterns

    origin, (u, v) = ds["input_origin"].values, ds["input_basis"].values
    count, a = int(ds["region_count"]), float(ds["region_count"].attrs["half_width"])
    assert _grid_count(mlp, origin, u, v, a) <= count
    region, s, t = ds["vertex_region"].values, ds["vertex_s"].values, ds["vertex_t"].values
    centroids = np.array([[s[region == r].mean(), t[region == r].mean()] for r in range(count)])
    x = jnp.asarray(origin + centroids[:, :1] * u + centroids[:, 1:] * v)
    np.testing.assert_array_equal(np.asarray(activation_patterns(mlp, x)), ds["region_pattern"].values.astype(bool))
    return count


def check_the_truths_network(out):
    """DSLT4 PT1's network at the truth (13 parameters): Lanczos's eigenvalues are the dense Hessian's (its Krylov
    space is the whole space), the plane's directions its top eigenvectors, Hutchinson's trace within 4 se of
    tr H, the regions of its two kinks on the input square (4), which a fine grid finds too."""
    out, metrics, ds, net, r = _run("network_landscape_truth", out)
    point = _common(out, metrics, ds, net)
    dense = _dense(net, point)
    k = ds.sizes["k"]
    np.testing.assert_allclose(ds["eigenvalue"].values, dense[:k], rtol=1e-8, atol=1e-12)
    assert abs(metrics["trace"] - dense.sum()) <= 4 * metrics["trace_se"]
    assert abs(metrics["slq_trace"] - dense.sum()) <= 4 * metrics["slq_trace_se"]
    # the zero node (w = b = q = 0) enters L_n at second order only through relu'(0) = 0: 4 of 13 exactly zero
    assert int(np.sum(np.abs(dense) <= 1e-12 * dense[0])) == 4
    from slt_relu.hessian import hessian_vector_product

    hvp = hessian_vector_product(net.loss_fn, point, net.data)
    for d, lam in zip(("u", "v"), dense[:2]):
        vec = ds["direction_vector"].sel(direction=d).values
        np.testing.assert_allclose(np.asarray(hvp(jnp.asarray(vec))), lam * vec, atol=1e-8 * dense[0])
    assert metrics["num_params"] == 13 and metrics["n"] == 500 and metrics["directions"] == "hessian"
    assert _regions(ds, net.mlp) == metrics["region_count"] == 4


def check_the_digits_network(out):
    """The digits MLP 64-8-10 after 30 Adam steps: the centre, a line, the regions of the plane through the first
    training 0, 1 and 2 (the images at (-1/3, -1/3), (2/3, -1/3), (-1/3, 2/3)), a grid counts no more."""
    from slt_relu.datasets import load_digits

    out, metrics, ds, net, r = _run("network_landscape_digits", out)
    _common(out, metrics, ds, net)
    assert metrics["num_params"] == 8 * 65 + 10 * 9 and metrics["steps"] == 30
    digits = load_digits(key=0)
    images = [digits.x_train[np.flatnonzero(digits.y_train == c)[0]] for c in (0, 1, 2)]
    origin, (u, v) = ds["input_origin"].values, ds["input_basis"].values
    for image, s, t in zip(images, ds["anchor_s"].values, ds["anchor_t"].values):
        np.testing.assert_allclose(origin + s * u + t * v, image, atol=1e-12)
    assert _regions(ds, net.mlp) == metrics["region_count"] > 1


def check_the_tms_network(out):
    """The toy model at its 6-gon: the loss at the point is the 6-gon's exact loss, the top eigenvalues the exact
    Hessian's (slt_relu.tms.loss_hessian; a degenerate pair among them), no regions."""
    from slt_relu.tms import loss_hessian

    out, metrics, ds, net, r = _run("network_landscape_tms", out)
    point = _common(out, metrics, ds, net)
    assert metrics["loss_at_center"] == pytest.approx(metrics["kgon_loss"], rel=1e-12)
    dense = np.linalg.eigvalsh(np.asarray(loss_hessian(point)))[::-1]
    np.testing.assert_allclose(ds["eigenvalue"].values, dense[:ds.sizes["k"]], rtol=1e-8)
    assert abs(metrics["trace"] - dense.sum()) <= 4 * metrics["trace_se"]
    assert "region_count" not in ds and "region_count" not in metrics


BAD = [
    ("truth", {"network.source": "nope"}, "network.source: expected one of 'truth', 'digits', 'tms'"),
    ("truth", {"landscape.resolution": 1}, "landscape.resolution: expected an integer in [3, 401]"),
    ("truth", {"landscape.resolution": 40}, "landscape.resolution: expected an odd number"),
    ("truth", {"landscape.top_eigenvalues": 14}, "landscape.top_eigenvalues: expected at most D = 13"),
    ("truth", {"landscape.density_steps": 14}, "landscape.density_steps: expected at most D = 13"),
    ("truth", {"truth": None}, "truth: missing; expected a [truth] table"),
    ("truth", {"network.width": 1}, "network.width: expected at least the truth's model width 2"),
    ("truth", {"landscape.region_digits": [1, 2, 3]}, "landscape.region_digits: expected unset"),
    ("truth", {"truth": {"name": "dslt3_example_3_4"}, "landscape.regions": True, "landscape.top_eigenvalues": 3,
               "landscape.density_steps": 9}, "landscape.regions: expected false or unset"),
    ("digits", {"truth": {"name": "dslt4_pt1"}}, "truth: expected none for network.source = 'digits'"),
    ("digits", {"network.widths": [63, 10]}, "network.widths: expected [64, hidden widths..., 10]"),
    ("digits", {"landscape.region_digits": [1, 1, 3]}, "landscape.region_digits: expected three distinct digits"),
    ("digits", {"landscape.top_eigenvalues": 4811}, "landscape.top_eigenvalues: expected an integer in [1, 200]"),
    ("tms", {"network.k": 7}, "network.k: expected 1 <= k <= features = 6"),
    ("tms", {"landscape.regions": True}, "landscape.regions: expected false or unset"),
    ("tms", {"landscape.density_steps": 19}, "landscape.density_steps: expected at most D = 18"),
    ("tms", {"landscape.directions": "pca"}, "landscape.directions: expected one of 'random', 'hessian'"),
]


@pytest.mark.parametrize("name,overrides,message", BAD, ids=[f"{n}-{'-'.join(o)}" for n, o, _ in BAD])
def test_bad_settings_are_refused_in_one_line(name, overrides, message):
    with pytest.raises(ConfigError) as err:
        runner.prepare(ROOT / "experiments" / f"network_landscape_{name}.toml", overrides)
    jax.config.update("jax_enable_x64", True)
    assert str(err.value).startswith(message) and "\n" not in str(err.value), str(err.value)


def test_every_config_has_a_memory_estimate():
    from slt_relu.workflow import memory

    for name in ("truth", "digits", "tms"):
        settings = runner.prepare(ROOT / "experiments" / f"network_landscape_{name}.toml").settings
        needs = memory.needs(settings)
        assert {n.what.split(" (")[0] for n in needs} >= {"the loss on the grid", "the data set"}
        memory.check(settings)
    jax.config.update("jax_enable_x64", True)
