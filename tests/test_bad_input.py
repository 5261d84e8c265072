"""Library functions refuse bad input with a ValueError naming the argument, before any JAX tracing."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu as S
from slt_relu.loss import empirical_loss_columns, gaussian_nll
from slt_relu.mlp import train_mlp
from slt_relu.phases import radius_rule
from slt_relu.posterior import draw_datasets
from slt_relu.posterior.beta_sweep import beta_sweep_curve, wbic
from slt_relu.posterior.estimand_curve import tempered_loss_curve
from slt_relu.posterior.llc_tuning import calibrate_llc
from slt_relu.posterior.llc import (LLCSettings, llc_two_layer, minimize_loss,
                                    normal_crossing_expectation, two_layer_loss_for)
from slt_relu.regions import count_regions_box_exact, count_regions_grid, count_regions_segment, kmeans

TRUTH = S.truths.m_symmetric(3)
BOX = S.UniformBox(1.0, 2)


@pytest.mark.parametrize("sigma", [0.0, -1.0, float("nan"), float("inf")])
def test_sigma_must_be_positive_and_finite(sigma):
    x, y = S.sample_dataset(jax.random.PRNGKey(0), TRUTH, BOX, 10)
    for call in (lambda: S.population_loss(TRUTH, TRUTH, BOX, sigma),
                 lambda: S.empirical_loss(TRUTH, x, y, sigma),
                 lambda: S.fisher_information(TRUTH, BOX, sigma),
                 lambda: S.fisher_rank(TRUTH, BOX, sigma)):
        with pytest.raises(ValueError, match="sigma: expected a positive finite noise standard deviation"):
            call()
    ex = S.truths.get("dslt3_example_3_4")
    xg, yg = S.sample_dataset(jax.random.PRNGKey(1), ex.truth, ex.inputs, 20, 1.0)
    for call in (lambda: empirical_loss_columns(TRUTH, x.T, y, sigma),
                 lambda: S.grid_posterior(xg, yg, 10.0, model=ex.model, sigma=sigma, ranges=[(0, 1), (0, 1)],
                                          resolution=5),
                 lambda: two_layer_loss_for(sigma),
                 lambda: llc_two_layer(jax.random.PRNGKey(0), TRUTH, x, y, sigma=sigma)):
        with pytest.raises(ValueError, match="sigma: expected a positive finite noise standard deviation"):
            call()
    if not sigma == 0.0:                                     # noiseless data sets (sigma = 0) are allowed
        with pytest.raises(ValueError, match="sigma: expected a finite noise standard deviation >= 0"):
            S.sample_dataset(jax.random.PRNGKey(0), TRUTH, BOX, 10, sigma)
    # traced sigma (inside jit / vmap) is not checked, and a good one gives the old numbers
    f = jax.jit(lambda s: S.population_loss(TRUTH, TRUTH._replace(c=jnp.asarray(1.0)), BOX, s))
    assert float(f(2.0)) == pytest.approx(1.0 / 8.0)


def test_non_finite_parameters_in_fisher_functions():
    bad = TRUTH._replace(w=TRUTH.w.at[0, 1].set(jnp.nan))
    for fn in (S.fisher_rank, S.fisher_information, S.fisher_spectrum, S.null_accounting):
        with pytest.raises(ValueError, match=r"params.w: expected finite numbers"):
            fn(bad, BOX)
    with pytest.raises(ValueError, match=r"params.q: expected finite numbers"):
        S.fisher_rank(TRUTH._replace(q=TRUTH.q.at[1].set(jnp.inf)), BOX)


@pytest.mark.parametrize("width", [-1, 0, 2.5, True, "3"])
def test_init_params_width(width):
    with pytest.raises(ValueError, match="width: expected a positive integer"):
        S.init_params(jax.random.PRNGKey(0), width, 2)


def test_init_params_n_in_and_scale():
    with pytest.raises(ValueError, match="n_in: expected a positive integer"):
        S.init_params(jax.random.PRNGKey(0), 3, 0)
    with pytest.raises(ValueError, match="scale: expected a positive finite number"):
        S.init_params(jax.random.PRNGKey(0), 3, 2, scale=-1.0)
    assert S.init_params(jax.random.PRNGKey(0), np.int64(3), 2).w.shape == (3, 2)


def test_input_dimension_mismatch_is_named():
    box3 = S.UniformBox(1.0, 3)
    for call in (lambda: S.population_loss(TRUTH, TRUTH, box3),
                 lambda: S.fisher_rank(TRUTH, box3),
                 lambda: S.fisher_information(TRUTH, S.Gaussian(1.0, 1))):
        with pytest.raises(ValueError, match="inputs: expected n_in = 2 like the parameters, got"):
            call()
    with pytest.raises(ValueError, match=r"x: expected n_in = 2 columns like params"):
        S.empirical_loss(TRUTH, jnp.zeros((5, 3)), jnp.zeros(5))
    with pytest.raises(ValueError, match="inputs: expected n_in = 2 like the parameters, got"):
        S.sample_dataset(jax.random.PRNGKey(0), TRUTH, box3, 10, 1.0)
    with pytest.raises(ValueError, match=r"x: expected shape \(n, n_in\) with n_in = 2 like params_star"):
        llc_two_layer(jax.random.PRNGKey(0), TRUTH, jnp.zeros((5, 3)), jnp.zeros(5))
    ex = S.truths.get("dslt4_pt1", t=1.2)
    with pytest.raises(ValueError, match="x: expected n_in = 2 like the model's parameters, got x of shape"):
        S.sample_posterior(jax.random.split(jax.random.PRNGKey(0), 1), jnp.zeros((1, 5, 3)), jnp.zeros((1, 5)), 10.0,
                           model=ex.model)
    ex = S.truths.get("dslt3_example_3_4")
    with pytest.raises(ValueError, match=r"x: expected shape \(n, n_in\) with n_in = 1 like the model's parameters"):
        S.grid_posterior(jnp.zeros((5, 2)), jnp.zeros(5), 10.0, model=ex.model, ranges=[(0, 1), (0, 1)])


# ---------------------------------------------------------------------------------------- sampling entry points

EX = S.truths.get("dslt4_pt1", t=1.2)
EX34 = S.truths.get("dslt3_example_3_4")
KEYS = jax.random.split(jax.random.PRNGKey(0), 1)
XK, YK = draw_datasets(KEYS, EX.truth, EX.inputs, 8)                     # (1, 8, 2), (1, 8)
XG, YG = S.sample_dataset(jax.random.PRNGKey(1), EX34.truth, EX34.inputs, 8)
LOSS = lambda w, d: 0.5 * jnp.sum(w ** 2) + 0.0 * jnp.sum(d)
BAD_POSITIVE = [-1, 0.0, float("nan"), float("inf"), [1.0, float("nan")]]


def _grid(x=XG, y=YG, n_beta=10.0, resolution=5):
    return S.grid_posterior(x, y, n_beta, model=EX34.model, ranges=[(0, 1), (0, 1)], resolution=resolution)


@pytest.mark.parametrize("bad", BAD_POSITIVE)
def test_temperatures_must_be_positive_and_finite(bad):
    for name, call in [("n_beta", lambda: S.sample_posterior(KEYS, XK, YK, bad, model=EX.model)),
                       ("n_beta", lambda: S.smc_posterior(KEYS, XK, YK, bad, model=EX.model)),
                       ("n_beta", lambda: _grid(n_beta=bad)),
                       ("n_beta", lambda: normal_crossing_expectation([1], bad, 1.0))]:
        with pytest.raises(ValueError, match=f"{name}: expected a positive finite number"):
            call()
    with pytest.raises((ValueError, TypeError), match=r"^n_beta: expected a (finite )?number"):     # one line
        LLCSettings(n_beta=bad)
    if bad != 0.0:                                                      # n beta = 0 samples the prior
        with pytest.raises(ValueError, match="t: expected a finite number >= 0"):
            tempered_loss_curve(jax.random.PRNGKey(0), LOSS, jnp.ones(1), jnp.zeros(3), bad)
    if np.ndim(bad) == 0:
        with pytest.raises(ValueError, match="betas: expected at least two positive finite numbers"):
            beta_sweep_curve(jax.random.PRNGKey(0), LOSS, jnp.ones(1), jnp.zeros(3), betas=[1.0, bad])


def test_n_beta_shape_and_other_scales():
    with pytest.raises(ValueError, match=r"n_beta: expected a scalar or shape \(1,\)"):
        S.sample_posterior(KEYS, XK, YK, [1.0, 2.0], model=EX.model)
    with pytest.raises(ValueError, match="init_radius: expected a positive finite number"):
        S.sample_posterior(KEYS, XK, YK, 10.0, model=EX.model, init_radius=float("inf"))
    with pytest.raises(ValueError, match="prior.w: expected .* a finite scale > 0"):
        S.sample_posterior(KEYS, XK, YK, 10.0, model=EX.model, prior=S.Prior(w=("normal", float("inf"))))
    with pytest.raises(ValueError, match=r"^localization: expected a finite number in \[0, 1e\+08\], got nan$"):
        LLCSettings(localization=float("nan"))
    with pytest.raises(ValueError, match="prior_std: expected a positive finite number"):
        tempered_loss_curve(jax.random.PRNGKey(0), LOSS, jnp.ones(1), jnp.zeros(3), [1.0], prior_std=0.0)
    with pytest.raises(ValueError, match="chains: expected a positive integer"):
        tempered_loss_curve(jax.random.PRNGKey(0), LOSS, jnp.ones(1), jnp.zeros(3), [1.0], chains=0)
    with pytest.raises(ValueError, match="num_steps: expected a positive integer"):
        minimize_loss(LOSS, jnp.ones(1), jnp.zeros(3), num_steps=0)
    with pytest.raises(ValueError, match="step_sizes, localizations: expected at least one of each"):
        calibrate_llc(jax.random.PRNGKey(0), LOSS, jnp.ones(1), jnp.zeros(3), [], [1.0])
    with pytest.raises(ValueError, match="data: WBIC's beta = 1/log n needs n >= 2"):
        wbic(jax.random.PRNGKey(0), LOSS, jnp.ones(1), jnp.zeros(1))


@pytest.mark.parametrize("settings", ["nuts", {"name": "nuts"}, S.SGLDSettings()])
def test_settings_must_be_a_settings_class(settings):
    with pytest.raises(TypeError, match="settings: expected NUTSSettings, HMCSettings or SMCSettings, got"):
        S.sample_posterior(KEYS, XK, YK, 10.0, model=EX.model, settings=settings)
    with pytest.raises(TypeError, match="settings: expected SMCSettings, got"):
        S.smc_posterior(KEYS, XK, YK, 10.0, model=EX.model, settings=settings)
    with pytest.raises(TypeError, match="settings: expected NUTSSettings or HMCSettings, got"):
        tempered_loss_curve(jax.random.PRNGKey(0), LOSS, jnp.ones(1), jnp.zeros(3), [1.0], settings=settings)
    if not isinstance(settings, S.SGLDSettings):                          # sample runs SGLD too
        with pytest.raises(TypeError, match="settings: expected the settings of a registered sampler .*, got"):
            S.sample(KEYS, None, jnp.zeros((1, 2)), (), settings)


@pytest.mark.parametrize("keys", [jnp.zeros((1, 2)), np.arange(1), jnp.zeros((1, 3), jnp.uint32), "key", None])
def test_keys_must_be_prng_keys(keys):
    with pytest.raises(TypeError, match="keys: expected a 1-D batch of PRNG keys"):
        S.sample_posterior(keys, XK, YK, 10.0, model=EX.model)
    with pytest.raises(TypeError, match="keys: expected a 1-D batch of PRNG keys"):
        S.sample(keys, None, jnp.zeros((1, 2)), (), S.NUTSSettings())
    with pytest.raises(TypeError, match="keys: expected a 1-D batch of PRNG keys"):
        draw_datasets(keys, TRUTH, BOX, 5)


def test_single_keys_and_typed_keys():
    for key in (0, jnp.zeros(2), jax.random.split(jax.random.PRNGKey(0), 2)):
        with pytest.raises(TypeError, match="key: expected a PRNG key"):
            S.estimate_llc(key, LOSS, jnp.ones(1), jnp.zeros(3))
        with pytest.raises(TypeError, match="key: expected a PRNG key"):
            tempered_loss_curve(key, LOSS, jnp.ones(1), jnp.zeros(3), [1.0])
    from slt_relu.sampling import check_keys

    typed = jax.random.split(jax.random.key(0), 3)                        # typed keys: their key data
    np.testing.assert_array_equal(check_keys(typed), jax.random.key_data(typed))
    assert check_keys(jax.random.key(1), batch_ndim=0).shape == (2,)
    raw = jax.random.split(jax.random.PRNGKey(0), 3)
    np.testing.assert_array_equal(check_keys(raw), raw)
    np.testing.assert_array_equal(draw_datasets(typed, TRUTH, BOX, 5)[0],
                                  draw_datasets(jax.random.key_data(typed), TRUTH, BOX, 5)[0])


@pytest.mark.parametrize("where", ["x", "y"])
def test_data_must_be_finite_for_samplers(where):
    bad = lambda a: a.at[(0,) * a.ndim].set(jnp.nan)
    xk, yk = (bad(XK), YK) if where == "x" else (XK, bad(YK))
    xg, yg = (bad(XG), YG) if where == "x" else (XG, bad(YG))
    for call in (lambda: S.sample_posterior(KEYS, xk, yk, 10.0, model=EX.model),
                 lambda: _grid(xg, yg),
                 lambda: llc_two_layer(jax.random.PRNGKey(0), EX.truth, xk[0], yk[0])):
        with pytest.raises(ValueError, match=f"{where}: expected finite numbers"):
            call()
    with pytest.raises(ValueError, match="params_star.q: expected finite numbers"):
        llc_two_layer(jax.random.PRNGKey(0), EX.truth._replace(q=EX.truth.q.at[0].set(jnp.inf)), XK[0], YK[0])


def test_data_must_be_non_empty():
    with pytest.raises(ValueError, match=r"x: expected at least one data point \(n >= 1\), got shape \(0, 2\)"):
        S.empirical_loss(TRUTH, jnp.zeros((0, 2)), jnp.zeros(0))
    with pytest.raises(ValueError, match=r"x_cols, y: expected shapes \(n_in, n\) with n >= 1"):
        empirical_loss_columns(TRUTH, jnp.zeros((2, 0)), jnp.zeros(0))
    with pytest.raises(ValueError, match="resid: expected at least one residual"):
        gaussian_nll(jnp.zeros(0), 1.0)
    for x, y in [(jnp.zeros((1, 0, 2)), jnp.zeros((1, 0))), (jnp.zeros((0, 8, 2)), jnp.zeros((0, 8)))]:
        with pytest.raises(ValueError, match=r"x: expected at least one data set of at least one point"):
            S.sample_posterior(jnp.zeros((0, 2), jnp.uint32), x, y, 10.0, model=EX.model)
    with pytest.raises(ValueError, match=r"x: expected at least one data point"):
        _grid(jnp.zeros((0, 1)), jnp.zeros(0))
    with pytest.raises(ValueError, match=r"x: expected at least one data point"):
        llc_two_layer(jax.random.PRNGKey(0), TRUTH, jnp.zeros((0, 2)), jnp.zeros(0))
    with pytest.raises(ValueError, match="data: expected at least one data point"):
        S.estimate_llc(jax.random.PRNGKey(0), LOSS, jnp.ones(1), jnp.zeros(0))
    with pytest.raises(ValueError, match=r"y: expected shape \(8,\) like x's rows"):
        _grid(XG, YG[:5])
    with pytest.raises(ValueError, match=r"init_z: expected shape .* with at least one chain"):
        S.sample(jnp.zeros((0, 2), jnp.uint32), None, jnp.zeros((0, 2)), (), S.NUTSSettings())


# ---------------------------------------------------------------------------------------- sizes and thresholds

MLP1 = S.init_mlp(jax.random.PRNGKey(0), (2, 3, 1), bias_std=0.5)
MLP2 = S.init_mlp(jax.random.PRNGKey(0), (2, 3, 3, 1), bias_std=0.5)


@pytest.mark.parametrize("half_width", [-1, 0.0, float("nan"), float("inf"), "1"])
def test_region_counts_need_a_positive_finite_half_width(half_width):
    for call in (lambda: S.count_linear_regions(MLP1, half_width=half_width),
                 lambda: S.count_linear_regions(MLP2, half_width=half_width),
                 lambda: count_regions_box_exact(MLP1, half_width),
                 lambda: count_regions_grid(MLP2, half_width, 10)):
        with pytest.raises(ValueError, match="half_width: expected a positive finite number"):
            call()


def test_region_and_mlp_sizes():
    for resolution in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match="resolution: expected an integer >= 2"):
            S.count_linear_regions(MLP2, half_width=1.0, resolution=resolution)
        with pytest.raises(ValueError, match="resolution: expected an integer >= 2"):
            count_regions_grid(MLP2, 1.0, resolution)
    with pytest.raises(ValueError, match="resolution: expected an integer >= 3"):
        _grid(XG, YG, resolution=2)
    with pytest.raises(ValueError, match="segment: expected \\(start, end\\)"):
        S.count_linear_regions(MLP1, segment=([0.0, 0.0],))
    with pytest.raises(ValueError, match="start: expected finite numbers"):
        count_regions_segment(MLP1, [np.nan, 0.0], [1.0, 1.0])
    nan_mlp = MLP1._replace(layers=(MLP1.layers[0]._replace(b=MLP1.layers[0].b.at[1].set(jnp.nan)),) + MLP1.layers[1:])
    with pytest.raises(ValueError, match=r"params.layers\[0\].b: expected finite numbers"):
        S.count_linear_regions(nan_mlp, half_width=1.0)
    with pytest.raises(ValueError, match="tol: expected a finite number >= 0"):
        count_regions_box_exact(MLP1, 1.0, tol=-1.0)
    with pytest.raises(ValueError, match="widths: expected at least two positive integers"):
        S.init_mlp(jax.random.PRNGKey(0), (2, True, 1))
    with pytest.raises(ValueError, match="bias_std: expected a finite number >= 0"):
        S.init_mlp(jax.random.PRNGKey(0), (2, 3, 1), bias_std=-0.1)
    with pytest.raises(ValueError, match=r"points: expected shape \(p, 2\) with p >= 1"):
        S.functional_dimension(MLP1, jnp.zeros((0, 2)))
    with pytest.raises(ValueError, match="rtol: expected a finite number >= 0"):
        S.functional_dimension(MLP1, jnp.ones((3, 2)), rtol=float("nan"))
    with pytest.raises(ValueError, match="iters: expected an integer >= 0"):
        kmeans(jax.random.PRNGKey(0), jnp.ones((4, 2)), 2, iters=-1)
    for kwargs, message in [({"steps": -1}, "steps: expected an integer >= 0"),
                            ({"learning_rate": 0.0}, "learning_rate: expected a positive finite number"),
                            ({"x": jnp.zeros((0, 2)), "y": jnp.zeros(0)}, r"x: expected shape \(n, 2\) with n >= 1"),
                            ({"y": jnp.zeros(3)}, r"y: expected shape \(4,\) like x's rows"),
                            ({"y": jnp.full(4, jnp.nan)}, "y: expected finite numbers")]:
        args = {"x": jnp.ones((4, 2)), "y": jnp.ones(4), "steps": 2, "learning_rate": 0.1, **kwargs}
        with pytest.raises(ValueError, match=message):
            train_mlp(jax.random.PRNGKey(0), (2, 3, 1), **args)


@pytest.mark.parametrize("width, n_in, name", [(0, 2, "width"), (-1, 2, "width"), (True, 2, "width"),
                                               (2.0, 2, "width"), (2, 0, "n_in")])
def test_from_flat_sizes(width, n_in, name):
    with pytest.raises(ValueError, match=f"{name}: expected a positive integer"):
        S.from_flat(jnp.zeros(1), width, n_in)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_phase_thresholds(bad):
    for name in ("eps", "non_degenerate", "degenerate"):
        with pytest.raises(ValueError, match=f"{name}: expected a finite number >= 0"):
            radius_rule(TRUTH, **{name: bad})
    with pytest.raises(ValueError, match="tol: expected a finite number >= 0"):
        S.classify_phase(TRUTH, TRUTH, tol=bad)
    for name in ("sigma", "beta"):
        with pytest.raises(ValueError, match=f"{name}: expected a positive finite number"):
            S.classify_phase(TRUTH, TRUTH, n=100, inputs=BOX, **{name: bad})


@pytest.mark.parametrize("n", [0, -3, 2.0, True])
def test_classify_phase_n(n):
    with pytest.raises(ValueError, match="n: expected a positive integer"):
        S.classify_phase(TRUTH, TRUTH, n=n, inputs=BOX)


def test_traced_values_are_not_checked():
    """Validation happens at the boundary on concrete values; under jit / vmap the same calls trace."""
    from slt_relu.network import check_number

    assert float(jax.jit(lambda v: check_number(v, "v") * 2)(-1.0)) == -2.0
    x, y = S.sample_dataset(jax.random.PRNGKey(0), TRUTH, BOX, 10)
    losses = jax.vmap(lambda s: S.empirical_loss(TRUTH, x, y, s))(jnp.array([1.0, 2.0]))
    assert losses.shape == (2,) and np.all(np.isfinite(losses))
    assert radius_rule(TRUTH, eps=0.3).shape == ()                       # valid numbers: unchanged
