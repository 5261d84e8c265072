"""Tempered posteriors of two-layer ReLU networks and what is measured on them.

- ``target``: the posterior phi(w) exp(-n beta L_n(w)): its numpyro model, the prior, the potential
  the samplers run on; the tempered (optionally localized) target of any loss and prior;
- ``sample``: many chains (NUTS, HMC) or SMC runs of it, each on its own data set;
- ``grid``: the exact posterior of one or two free parameters, by quadrature;
- ``masses``: phase masses with their errors (data sets, runs pooled by their evidence), crossovers;
- ``evidence``: log Z and free energies from SMC runs, learning coefficients from their slopes;
- ``nested``: nested sampling's log Z, a second estimator;
- ``llc``: the local learning coefficient (SGLD), beta sweeps, WBIC;
- ``free_energy_curve``: lambda and m from SMC's free-energy curve F(t) (three estimators).
"""
from .grid import GridPosterior, grid_posterior
from .sample import PosteriorSamples, SMCPosterior, draw_datasets, sample_posterior, smc_posterior
from .target import (GROUPS, PRIOR_KINDS, GaussianPrior, PosteriorPotential, Prior, PriorDensity, Target,
                     TemperedTarget, posterior_model, resolve_beta, target)

__all__ = ["GROUPS", "GaussianPrior", "GridPosterior", "PRIOR_KINDS", "PosteriorPotential", "PosteriorSamples",
           "Prior", "PriorDensity", "SMCPosterior", "Target", "TemperedTarget", "draw_datasets", "grid_posterior",
           "posterior_model", "resolve_beta", "sample_posterior", "smc_posterior", "target"]
