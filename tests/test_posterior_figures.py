"""The posterior kind's figures are drawn from its results.nc alone (``posterior_figures``): what they draw beyond
the sweep's numbers is in the Dataset (``with_figure_data``), bounded (a subsample of the effective weights, every
k-th draw of a trace) and exactly what the figures drew from every draw.  The results are made up as in
test_posterior_metrics.py (no sampling)."""
import numpy as np
import pytest

from test_posterior_metrics import CASES, analysis

FIGURES = {
    "smc": ["effective_weights", "free_energy", "free_energy_scaling", "phase_diagram", "phase_mass",
            "rules_vs_phases"],
    "nuts_filtered": ["effective_weights", "phase_mass", "rules_vs_phases", "traces"],
    "smc_labels_only": ["effective_weights", "phase_mass"],
}


def _png(fig, path) -> bytes:
    import matplotlib.pyplot as plt

    from slt_relu.plots import save_figure

    save_figure(fig, path)
    plt.close(fig)
    return path.read_bytes()


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_figure_is_drawn_from_results_nc(case, tmp_path):
    """The figures drawn from results.nc as read back are those of the run's Dataset in memory
    (nothing lost on the way through netCDF: NaN, bools, strings, a label only one sampler gave)."""
    from slt_relu.kinds.posterior_figures import posterior_figures
    from slt_relu.netcdf import write_tree
    from slt_relu.workflow.output import read_results

    r, output, _ = analysis(*CASES[case])
    write_tree(output.results, tmp_path / "results.nc")
    read = read_results(tmp_path / "results.nc")
    drawn, again = posterior_figures(r, output.results), posterior_figures(r, read)
    assert sorted(drawn) == sorted(again) == FIGURES[case]
    for name in drawn:
        assert _png(drawn[name], tmp_path / f"{name}.png") == _png(again[name], tmp_path / f"{name}-again.png"), name
    if "sampler" in read.dims:                         # each sampler's own labels, in its own order
        ranks = read["label_rank"].values
        for k in range(read.sizes["sampler"]):
            real = np.sort(ranks[k][np.isfinite(ranks[k])])
            np.testing.assert_array_equal(real, np.arange(len(real)))


def test_the_figures_keep_a_bounded_subsample_of_the_draws(tmp_path):
    """More effective weights than a panel draws and longer chains than a trace keeps: results.nc holds the
    subsample the figure draws and every k-th draw of the traced chains, and the pictures drawn from them are those
    drawn from every draw."""
    from slt_relu.kinds.posterior_figures import posterior_figures
    from slt_relu.kinds.posterior_report import draws_params
    from slt_relu.phases import effective_weights
    from slt_relu.plots import weights_facets_figure
    from slt_relu.plots.posterior import WEIGHTS_MAX_POINTS, weights_subsample

    overrides = {"posterior.n": 200, "posterior.datasets": 2, "posterior.chains_per_dataset": 4,
                 "sampler.num_warmup": 30, "sampler.num_samples": 3300, "phases.classify_every": 50,
                 "sweep.truth.v": [1.0, 3.0], "plots.weight_panels": 1, "plots.trace_points": 1}
    r, output, results = analysis("dslt4_pt2_orientation_reversal.toml", overrides)
    ds = output.results
    pt = r.points[0]                                   # one panel and one trace: the first point
    full = effective_weights(draws_params(pt.settings, results[pt.index]["flat"])).reshape(-1, 2)
    assert len(full) == 8 * 3300 * 3 > WEIGHTS_MAX_POINTS
    assert ds["effective_weights"].shape == (1, WEIGHTS_MAX_POINTS, 2) and ds["weights_point"].values.tolist() == [0]
    assert ds["effective_weights_count"].values.tolist() == [WEIGHTS_MAX_POINTS]
    np.testing.assert_array_equal(ds["effective_weights"].values[0], weights_subsample([full])[0])
    loss = np.asarray(results[pt.index]["loss"])
    assert ds["trace_thin"].values.tolist() == [2] and ds["trace_draws"].values.tolist() == [1650]
    np.testing.assert_array_equal(ds["trace_loss"].values[0], loss[:, ::2])
    assert ds["trace_radius_min"].shape == ds["trace_radius_max"].shape == (1, 8, 1650)

    drawn = posterior_figures(r, ds)
    truth = pt.settings.example.truth
    eff_truth = np.abs(np.asarray(truth.q))[:, None] * np.asarray(truth.w)
    title = pt.settings.example.description.split(":")[0]
    from_all = weights_facets_figure([("v = 1", full, eff_truth)],
                                     title=f"{title}: posterior density of the effective weights |q_i| w_i (all nodes)")
    assert _png(drawn["effective_weights"], tmp_path / "a.png") == _png(from_all, tmp_path / "b.png")


def test_the_classify_panel_shows_the_samplers_own_labels_in_its_order(tmp_path):
    """With [compare], results.nc holds the labels of both samplers (in the order of their union): the figures draw
    the [sampler]'s own, in its order (``label_rank``), whatever the Dataset's order, and none only [compare] gave."""
    from slt_relu.kinds.posterior_figures import posterior_figures

    r, output, _ = analysis(*CASES["smc"])
    ds = output.results
    assert ds.sizes["label"] == 3
    shuffled = ds.isel(label=[2, 0, 1])
    for name in ("phase_mass", "rules_vs_phases"):
        assert _png(posterior_figures(r, ds)[name], tmp_path / "a.png") == \
            _png(posterior_figures(r, shuffled)[name], tmp_path / "b.png"), name
    rank = ds["label_rank"].values.astype(float)
    rank[0] = [np.nan, 1, 0]                           # the first label only [compare] gave; the others swapped
    fig = posterior_figures(r, ds.assign(label_rank=(ds["label_rank"].dims, rank)))["phase_mass"]
    shown = [lab for lab in fig.axes[1].get_legend_handles_labels()[1] if not lab.startswith("open")]
    assert shown == ds["label_name"].values.tolist()[2:0:-1]
