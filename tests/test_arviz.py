"""ArviZ data of NUTS draws, SMC particles and LLC traces: variables, dimensions and values against the
sampler's own arrays, the netCDF round trip, and arviz-stats's summary with R-hat per data set."""
import jax
import numpy as np
import pytest
import xarray as xr

import slt_relu as S
from slt_relu.posterior.llc import LLCSettings, two_layer_loss_for
from slt_relu import diagnostics as dg
from slt_relu.arviz_data import load_draws, save_draws
from slt_relu.posterior import draw_datasets, sample_posterior

azs = pytest.importorskip("arviz_stats")


@pytest.fixture(scope="module")
def nuts_draws():
    ex = S.truths.get("dslt4_pt1", t=1.2)
    x, y = draw_datasets(jax.random.split(jax.random.PRNGKey(0), 2), ex.truth, ex.inputs, 200, 1.0)
    ps = sample_posterior(jax.random.split(jax.random.PRNGKey(1), 6), x, y, 50.0, model=ex.model,
                          settings=S.NUTSSettings(num_warmup=60, num_samples=40), chains_per_dataset=3)
    return ps, (np.asarray(x), np.asarray(y))


def test_nuts_draws_as_arviz_data(nuts_draws, tmp_path):
    ps, observed = nuts_draws
    tree = S.to_arviz(ps, observed=observed)
    post, st = tree["posterior"], tree["sample_stats"]
    assert dict(post.sizes) == {"chain": 3, "draw": 40, "dataset": 2, "node": 2, "input": 2}
    assert post["w"].dims == ("chain", "draw", "dataset", "node", "input")
    for k in range(2):                                  # chain r of data set k is sampler chain 3 k + r
        for r in range(3):
            c = 3 * k + r
            np.testing.assert_array_equal(post["w"].sel(dataset=k, chain=r), ps.params.w[c])
            np.testing.assert_array_equal(post["c"].sel(dataset=k, chain=r), ps.params.c[c])
            np.testing.assert_array_equal(post["loss"].sel(dataset=k, chain=r), ps.loss[c])
            np.testing.assert_array_equal(st["energy"].sel(dataset=k, chain=r), ps.draws.info.energy[c])
            np.testing.assert_array_equal(st["lp"].sel(dataset=k, chain=r), -ps.draws.potential_energy[c])
    steps = st["n_steps"].values
    depth = st["tree_depth"].values
    assert np.all((2 ** (depth - 1) <= steps) & (steps <= 2 ** depth - 1))
    assert set(st.data_vars) >= {"diverging", "acceptance_rate", "step_size", "inverse_mass_matrix", "grad_evals"}
    np.testing.assert_array_equal(tree["observed_data"]["y"].values, observed[1])
    np.testing.assert_allclose(tree["constant_data"]["n_beta"].values, 50.0)
    # netCDF round trip: identical arrays, dimensions and coordinates
    path = save_draws(tree, tmp_path / "draws.nc")
    back = load_draws(path)
    for group in ("posterior", "sample_stats", "observed_data", "constant_data"):
        xr.testing.assert_identical(back[group].to_dataset(), tree[group].to_dataset())
    assert not list(tmp_path.glob(".*partial"))


def test_arviz_stats_summarises_per_data_set(nuts_draws, tmp_path):
    """R-hat per data set, never pooled: arviz-stats on the file equals slt_relu's R-hat on each data set's chains."""
    ps, _ = nuts_draws
    back = load_draws(save_draws(S.to_arviz(ps), tmp_path / "d.nc"))
    table = azs.summary(back, var_names=["loss"])
    assert len(table) == 2 and table["r_hat"].notna().all()
    for k in range(2):
        ours = dg.rhat(ps.loss[ps.dataset == k])
        assert float(azs.rhat(back["posterior"]["loss"].sel(dataset=k))) == pytest.approx(ours, rel=1e-6)


def test_smc_particles_and_llc_traces_as_arviz_data(tmp_path):
    ex = S.truths.get("dslt3_example_3_4")
    x, y = draw_datasets(jax.random.split(jax.random.PRNGKey(2), 2), ex.truth, ex.inputs, 100, ex.sigma)
    smc = S.smc_posterior(jax.random.split(jax.random.PRNGKey(3), 2), x, y, 20.0, model=ex.model, sigma=ex.sigma,
                          settings=S.SMCSettings(num_particles=64, waste_free=True, num_mcmc_steps=3))
    tree = load_draws(save_draws(S.to_arviz(smc), tmp_path / "smc.nc"))
    st = tree["sample_stats"]
    np.testing.assert_allclose(st["log_evidence"].values[0], smc.log_evidence)
    stages = int(smc.num_stages.max())
    assert st["lambda"].shape == (1, 2, stages) and np.allclose(st["lambda"].values[0, np.arange(2),
                                                                                    smc.num_stages - 1], 1.0)
    np.testing.assert_array_equal(tree["posterior"]["w"].values[0], np.swapaxes(smc.params.w, 0, 1))
    np.testing.assert_array_equal(st["ess"].values[0, :, :stages], smc.ess[:, :stages])   # per run and stage
    np.testing.assert_allclose(tree["constant_data"]["n_beta"].values, [20.0, 20.0])
    est = S.estimate_llc(jax.random.PRNGKey(4), two_layer_loss_for(1.0), ex.truth, (x[0], y[0]),
                         LLCSettings(num_chains=3, num_steps=40, num_burnin=10, step_size=1e-4))
    tree = load_draws(save_draws(S.to_arviz(est), tmp_path / "llc.nc"))
    np.testing.assert_array_equal(tree["posterior"]["loss"].values, est.details.loss_trace)
    np.testing.assert_array_equal(tree["sample_stats"]["llc"].values, est.details.per_chain)
    np.testing.assert_array_equal(tree["sample_stats"]["acceptance_rate"].values, est.details.accept_prob)
    assert tree.attrs["llc_estimate"] == pytest.approx(est.lambda_)
    with pytest.raises(TypeError, match="result: expected PosteriorSamples, SMCPosterior or estimate_llc's "
                                        "LambdaEstimate, got a LambdaEstimate of beta_sweep"):
        S.to_arviz(est._replace(method="beta_sweep", details=None))
    with pytest.raises(TypeError, match="result: expected PosteriorSamples, SMCPosterior or estimate_llc's"):
        S.to_arviz(ex.truth)
