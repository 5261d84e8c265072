"""Library functions refuse bad input with a ValueError naming the argument, before any JAX tracing."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt_relu as S

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
    for call in (lambda: S.empirical_loss_columns(TRUTH, x.T, y, sigma),
                 lambda: S.grid_posterior(xg, yg, 10.0, model=ex.model, sigma=sigma, ranges=[(0, 1), (0, 1)],
                                          resolution=5),
                 lambda: S.two_layer_loss_for(sigma),
                 lambda: S.llc_two_layer(jax.random.PRNGKey(0), TRUTH, x, y, sigma=sigma)):
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
        S.llc_two_layer(jax.random.PRNGKey(0), TRUTH, jnp.zeros((5, 3)), jnp.zeros(5))
    ex = S.truths.get("dslt4_pt1", t=1.2)
    with pytest.raises(ValueError, match="x: expected n_in = 2 like the model's parameters, got x of shape"):
        S.sample_posterior(jax.random.split(jax.random.PRNGKey(0), 1), jnp.zeros((1, 5, 3)), jnp.zeros((1, 5)), 10.0,
                           model=ex.model)
    ex = S.truths.get("dslt3_example_3_4")
    with pytest.raises(ValueError, match=r"x: expected shape \(n, n_in\) with n_in = 1 like the model's parameters"):
        S.grid_posterior(jnp.zeros((5, 2)), jnp.zeros(5), 10.0, model=ex.model, ranges=[(0, 1), (0, 1)])
