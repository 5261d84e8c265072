"""Tempered posteriors of any model (the two-layer ReLU network first) and what is measured on them.

- ``prior``: the prior phi(w) of any model, and its map onto unconstrained coordinates;
- ``target``: the tempered (optionally localized) posterior phi(w) exp(-n beta L(w)) of any model and loss, the
  potential every sampler runs on; the two-layer posterior as a numpyro model;
- ``sample``: many chains (NUTS, HMC) or SMC runs of it, each on its own data set;
- ``grid``: the exact posterior of one or two free parameters, by quadrature;
- ``masses``: phase masses with their errors (data sets, runs pooled by their evidence), crossovers;
- ``evidence``: log Z and free energies from SMC runs, each phase's lambda from their slopes;
- ``stopping``: SMC's stopping rule: more independent runs, or runs with more particles, until a point's runs agree;
- ``nested``: nested sampling's log Z, a second estimator;
- ``learning_coefficient``: the one curve type every curve builder returns (``TemperedCurve``), the one estimate
  type every reader of lambda returns (``LambdaEstimate``), the least squares every reader fits with;
- ``free_energy_curve``: SMC's free-energy curve F(t), and lambda and m read off any curve by their asymptotic form
  (three estimators);
- ``estimand_curve``: an MCMC sampler's estimand t E_t[L] at several t (NUTS, SGLD) as a curve;
- ``llc``: the local learning coefficient (SGLD) at one t;
- ``beta_sweep``: the NUTS beta sweep's curve and its slope reading, WBIC;
- ``linear_gibbs``: the exact Gibbs sampler of deep linear networks and its curve;
- ``exact_free_energy``: exact F(t) of losses with a known lambda, by quadrature, and SMC's curves against them;
- ``observables``: the local posterior's observables on any sampler's draws: Bayesian influence functions
  (posterior covariances of per-sample losses) and susceptibilities, with jackknife errors over chains.
"""
from .grid import GridPosterior, grid_posterior
from .observables import bayesian_influence, per_sample_losses, susceptibility
from .sample import PosteriorSamples, SMCPosterior, draw_datasets, sample_posterior, smc_posterior
from .prior import PRIOR_KINDS, FlatPrior, Prior
from .target import TemperedTarget, posterior_model, resolve_beta, tempered_target

__all__ = ["FlatPrior", "GridPosterior", "PRIOR_KINDS", "PosteriorSamples", "Prior", "SMCPosterior", "TemperedTarget",
           "bayesian_influence", "draw_datasets", "grid_posterior", "per_sample_losses", "posterior_model",
           "resolve_beta", "sample_posterior", "smc_posterior", "susceptibility", "tempered_target"]
