"""Nested sampling's log evidence (slt_relu.posterior.nested) against the exact grid of DSLT3 Example 3.2, and its
arguments refused in one line."""
import math

import jax
import numpy as np
import pytest

import slt_relu as S
from slt_relu.posterior.evidence import logmeanexp
from slt_relu.posterior.nested import nested_log_evidence
from slt_relu.posterior import draw_datasets, grid_posterior, tempered_target


def example_3_2(n=1000):
    ex = S.truths.get("dslt3_example_3_2")
    x, y = draw_datasets(jax.random.split(jax.random.PRNGKey(2), 1), ex.truth, ex.inputs, n, ex.sigma)
    return ex, x[0], y[0], n / math.log(n)


def test_log_evidence_of_example_3_2_against_the_grid():
    """f = q relu(w x), two free coordinates, n beta = 145: log Z by quadrature (1,200^2 cells, edge mass
    < 1e-6) against nested sampling with 300 live points, within 4 of its own standard errors (those of the
    simulated volumes, about sqrt(H / 300) = 0.1 nats) plus the grid's 0.01; and the posterior masses of
    three regions from nested sampling's weighted points against the grid's."""
    ex, x, y, nb = example_3_2()
    g = grid_posterior(x, y, nb, model=ex.model, sigma=ex.sigma, ranges=[(-6.0, 6.0)] * 2, resolution=1200)
    assert g.edge_mass < 1e-6
    exact = float(logmeanexp(g.log_density.ravel()) + math.log(g.log_density.size * g.cell))
    got = nested_log_evidence(jax.random.PRNGKey(0), x, y, nb, model=ex.model, sigma=ex.sigma, num_live=300)
    assert 0.03 < got.log_evidence_se < 0.3 and got.deleted == got.steps * 30 + 300
    assert abs(got.log_evidence - exact) < 4 * got.log_evidence_se + 0.01, (got.log_evidence, exact)
    # the posterior weights of its points: the masses of three regions (|w| > |q| along the scaling orbit, w q
    # above the grid posterior's median of w q, the quadrant w, q > 0), against the grid's, within 5 binomial
    # standard errors at the weights' effective size 1 / sum w_i^2 (plus 0.01 for the volumes' own noise)
    P = g.points()
    wq = P[..., 0] * P[..., 1]
    order = np.argsort(wq.ravel())
    median = wq.ravel()[order][np.searchsorted(np.cumsum(g.density.ravel()[order]) * g.cell, 0.5)]
    regions = lambda w, q: [np.abs(w) > np.abs(q), w * q > median, (w > 0) & (q > 0)]
    exact_mass = np.array([g.mass(r) for r in regions(P[..., 0], P[..., 1])])
    free = np.asarray(jax.vmap(tempered_target(ex.model, sigma=ex.sigma).constrain)(got.z))
    assert got.z.shape == (got.deleted, 2) and abs(got.weight.sum() - 1) < 1e-9
    mass = np.array([got.weight[r].sum() for r in regions(free[:, 0], free[:, 1])])
    ess = 1 / np.sum(got.weight ** 2)
    assert ess > 300 and 0.3 < exact_mass[0] < 0.7 and abs(exact_mass[1] - 0.5) < 0.01, exact_mass
    np.testing.assert_array_less(np.abs(mass - exact_mass), 5 * np.sqrt(exact_mass * (1 - exact_mass) / ess) + 0.01)


@pytest.mark.parametrize("kwargs, message", [
    ({"num_live": 10}, "num_live"),
    ({"num_live": 50, "num_delete": 50}, "num_delete: expected fewer than num_live = 50"),
    ({"tol": 0.0}, "tol: expected a number in (0, 1)"),
    ({"n_beta": float("nan")}, "n_beta"),
])
def test_bad_arguments_are_refused(kwargs, message):
    ex, x, y, nb = example_3_2(50)
    kwargs = {"n_beta": nb, **kwargs}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        nested_log_evidence(jax.random.PRNGKey(0), x, y, model=ex.model, sigma=ex.sigma, **kwargs)
