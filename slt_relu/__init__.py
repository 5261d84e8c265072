"""slt_relu: loss landscapes and Bayesian posteriors of ReLU networks through singular learning theory.

The top-level namespace holds the names a researcher reaches for first (``__all__``, grouped below);
the public names fixed by docs/design.md are among them, each documented with its formula, shapes
and paper.  Everything else is importable from the module that defines it, e.g.
``slt_relu.regions.kmeans``, ``slt_relu.sampling.pad_chains``, ``slt_relu.posterior.beta_sweep.wbic``;
the modules and subpackages are attributes of the package (``slt_relu.sampling``,
``slt_relu.posterior``; ``slt_relu.plots`` is imported on first use, since it imports matplotlib).
"""
from . import (arviz_data, classify, diagnostics, fisher, hessian, inputs, known_lambda, loss, mlp, models, moves,
               network, phases, posterior, pytree, regions, sampling, symmetry, tms, truths)
from .arviz_data import load_draws, save_draws, to_arviz
from .classify import PhaseAssignment, classify_phase
from .diagnostics import ess_bulk, rhat
from .fisher import NullAccounting, fisher_information, fisher_rank, fisher_spectrum, null_accounting
from .hessian import hessian_rank, hessian_spectrum
from .inputs import Gaussian, UniformBox
from .loss import coordinate_slice, empirical_loss, population_loss, sample_dataset
from .mlp import MLP, init_mlp, mlp_forward
from .models import GaussianLoss, Model
from .network import (Restriction, TwoLayer, forward, from_flat, init_params, make_params, num_params,
                      scaling_generators, to_flat)
from .phases import radius_rule
from .posterior import (GridPosterior, PosteriorSamples, Prior, SMCPosterior, TemperedTarget, draw_datasets,
                        grid_posterior, sample_posterior, smc_posterior, tempered_target)
from .posterior.estimand_curve import mcmc_tempered_loss_curve
from .posterior.free_energy_curve import fit_learning_coefficient, smc_free_energy_curve
from .posterior.learning_coefficient import LambdaEstimate, TemperedCurve
from .posterior.linear_gibbs import linear_gibbs_curve
from .posterior.llc import LLCSettings, estimate_llc, llc_two_layer, minimize_loss
from .posterior.llc_curve import llc_at_checkpoints
from .posterior.llc_tuning import choose_llc_settings
from .posterior.masses import phase_masses
from .posterior.observables import bayesian_influence, per_sample_losses, susceptibility
from .regions import count_linear_regions, functional_dimension
from .sampling import (Draws, HMCInfo, HMCSettings, NUTSInfo, NUTSSettings, SGLDInfo, SGLDSettings, SMCInfo,
                       SMCSettings, sample)
from .symmetry import are_equivalent, permute, reduce, rescale, reverse_orientation

__version__ = "0.1.0"

__all__ = [
    # models: the protocol any network implements (slt_relu.models: from_function, from_equinox, from_flax, families)
    "models", "Model", "GaussianLoss",
    # two-layer networks f(x, w) = c + sum_i q_i relu(<w_i, x> + b_i) and their flat parameters
    "TwoLayer", "forward", "make_params", "init_params", "num_params", "to_flat", "from_flat", "Restriction",
    # true networks, input distributions q(x), data, the losses K(w) and L_n(w)
    "truths", "UniformBox", "Gaussian", "sample_dataset", "draw_datasets", "population_loss", "empirical_loss",
    "coordinate_slice",
    # the Fisher information and where its null directions come from (DSLT3)
    "fisher_information", "fisher_rank", "fisher_spectrum", "scaling_generators", "null_accounting", "NullAccounting",
    # symmetries (Petzka et al. 2020) and the phases of W0 (DSLT4)
    "permute", "rescale", "reverse_orientation", "reduce", "are_equivalent", "classify_phase", "PhaseAssignment",
    "radius_rule",
    # deep networks: linear regions and functional dimension (Sattelberg et al. 2020; Grigsby et al. 2023)
    "MLP", "init_mlp", "mlp_forward", "count_linear_regions", "functional_dimension",
    # the Hessian of any loss
    "hessian_spectrum", "hessian_rank",
    # tempered posteriors of any model and their phase masses (DSLT4)
    "Prior", "TemperedTarget", "tempered_target", "sample_posterior", "PosteriorSamples", "smc_posterior", "SMCPosterior", "grid_posterior",
    "GridPosterior", "phase_masses",
    # samplers: one interface, many chains sharded over the devices
    "sample", "Draws", "NUTSSettings", "HMCSettings", "SGLDSettings", "SMCSettings",
    "NUTSInfo", "HMCInfo", "SGLDInfo", "SMCInfo",
    # the learning coefficient: curve builders -> TemperedCurve, readers -> LambdaEstimate (local: Lau et al. 2023;
    # the asymptotic fit of lambda and m), and the known values
    "TemperedCurve", "LambdaEstimate", "smc_free_energy_curve", "mcmc_tempered_loss_curve", "linear_gibbs_curve",
    "fit_learning_coefficient", "estimate_llc", "choose_llc_settings", "llc_at_checkpoints", "LLCSettings", "minimize_loss", "llc_two_layer", "known_lambda",
    # the local posterior's observables: Bayesian influence functions and susceptibilities (Kreer et al. 2025)
    "per_sample_losses", "bayesian_influence", "susceptibility",
    # a second model family: the toy model of superposition (Chen et al. 2023), its own namespace slt_relu.tms
    "tms",
    # diagnostics and ArviZ data
    "rhat", "ess_bulk", "to_arviz", "save_draws", "load_draws",
]


def __getattr__(name):
    """``slt_relu.plots`` on first use (it imports matplotlib, which ``import slt_relu`` does not)."""
    if name == "plots":
        import importlib

        return importlib.import_module(".plots", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
