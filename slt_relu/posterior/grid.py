"""The exact posterior of a model with one or two free parameters, by quadrature on a grid: the
answer samplers are checked against (DSLT3's Examples 3.2 and 3.4).
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..loss import check_data
from ..network import Restriction, check_count, check_number
from .prior import Prior
from .target import tempered_target

__all__ = ["GridPosterior", "grid_posterior"]


class GridPosterior(NamedTuple):
    """p(theta | D_n) on a grid over the k = 1 or 2 free coordinates.

        log_density = log phi(theta) - n_beta L_n(theta)  (unnormalised)

    Attributes:
        axes: k arrays of grid values.
        names: the coordinates.
        log_density: (R,) or (R, R) the unnormalised log density (axis 0 is the first coordinate).
        density: normalised so that sum(density) * cell = 1.
        cell: the grid cell's length / area.
        edge_mass: the mass in the outermost grid cells (a check that the ranges hold the
            posterior).
    """

    axes: tuple
    names: list
    log_density: np.ndarray
    density: np.ndarray
    cell: float
    edge_mass: float

    def points(self) -> np.ndarray:
        """The grid points, shape (R, k) or (R, R, k)."""
        if len(self.axes) == 1:
            return self.axes[0][:, None]
        return np.stack(np.meshgrid(*self.axes, indexing="ij"), -1)

    def mass(self, mask) -> float:
        """Posterior mass of a region given as a boolean mask on the grid."""
        return float(np.sum(self.density[np.asarray(mask, bool)]) * self.cell)


def grid_posterior(x, y, n_beta: float, *, model: Restriction, prior: Prior = Prior(), sigma: float = 1.0,
                   ranges: Sequence, resolution: int = 401) -> GridPosterior:
    """The exact tempered posterior of a model with k = 1 or 2 free coordinates on a grid.

        log p = log phi(theta) - n_beta L_n(theta)

    normalised by the midpoint rule over the grid (the integrand is smooth between ReLU kinks;
    halving the spacing changes phase masses by far less than the sampler's error,
    tests/test_posterior.py).

    Args:
        x: (n, n_in) one data set's inputs.
        y: (n,) its outputs.
        n_beta: n * beta, positive and finite.
        model: Restriction with k = 1 or 2 free coordinates.
        prior: Prior phi of the free coordinates.
        sigma: the noise standard deviation of L_n, > 0.
        ranges: k pairs (low, high).
        resolution: R, grid points per axis (cell midpoints), >= 3.

    Returns:
        GridPosterior: log_density and density of shape (R,) or (R, R), the axes, the cell size and
        the edge mass.

    References:
        DSLT3 Examples 3.2 and 3.4 (the models checked this way).
    """
    k = model.num_free
    if k not in (1, 2):
        raise ValueError(f"model: grid posteriors need 1 or 2 free coordinates, got {k} ({model.free_names})")
    if len(ranges) != k or any(len(r) != 2 or not (np.all(np.isfinite(r)) and r[0] < r[1]) for r in ranges):
        raise ValueError(f"ranges: expected {k} pairs (low, high) of finite numbers with low < high, got {ranges!r}")
    resolution = check_count(resolution, "resolution", minimum=3)
    check_number(n_beta, "n_beta")
    target = tempered_target(model, prior, sigma)
    x, y = check_data(x, y, model.base.n_in, "the model's parameters")
    axes = tuple(lo + (np.arange(resolution) + 0.5) * (hi - lo) / resolution for lo, hi in ranges)  # cell midpoints
    pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, k)
    theta = jnp.asarray(pts, x.dtype)
    # the tempered target's pieces (posterior.target): L_n at every point, in bounded chunks, and the prior's
    # log density; summed in float64, since n_beta L_n is large and the density is exp of its differences
    loss = target._replace(prior=None).losses_at(theta, (x, y))
    log_prior = jax.vmap(target.prior_on(k).log_density)(theta)
    logp = -float(n_beta) * np.asarray(loss, np.float64) + np.asarray(log_prior, np.float64)
    shape = (resolution,) * k
    logp = logp.reshape(shape)
    cell = float(np.prod([a[1] - a[0] for a in axes]))
    dens = np.exp(logp - logp.max())
    dens /= dens.sum() * cell
    edge = np.ones(shape, bool)
    edge[(slice(1, -1),) * k] = False
    return GridPosterior(axes, model.free_names, logp, dens, cell, float(dens[edge].sum() * cell))
