"""slt_relu: loss landscapes and Bayesian posteriors of ReLU networks through singular learning theory.

Public names are fixed by docs/design.md; each is documented with its formula, shapes and paper.
"""
from . import truths
from .fisher import (
    NullAccounting,
    empirical_fisher_information,
    feature_jacobian,
    fisher_information,
    fisher_null_space,
    fisher_rank,
    fisher_spectrum,
    null_accounting,
    rank_bound,
    scaling_generators,
)
from .inputs import Gaussian, Quadrature, UniformBox, expectation_rule
from .loss import (
    coordinate_slice,
    empirical_loss,
    empirical_loss_columns,
    gaussian_nll,
    loss_slice,
    population_loss,
    population_losses,
    sample_dataset,
)
from .classify import NOT_IN_W0, PhaseAssignment, classify_phase, phase_labels, phase_name
from .phases import (
    PhaseLabel,
    Representative,
    effective_weights,
    radius_rule,
    sector_phase,
    sector_rule,
    true_set_representatives,
)
from .symmetry import (
    Irreducible,
    annihilating_subsets,
    are_equivalent,
    flip_orientation,
    merge_nodes,
    permute,
    random_symmetry,
    reduce,
    rescale,
    reverse_orientation,
    split_node,
)
from .mlp import (
    MLP,
    Dense,
    activation_patterns,
    dual_points,
    flatten_mlp,
    from_two_layer,
    init_mlp,
    local_affine_maps,
    mlp_forward,
    num_mlp_params,
    train_mlp,
    unflatten_mlp,
)
from .regions import (
    affine_map_between,
    cluster_affine_maps,
    count_linear_regions,
    count_regions_box_exact,
    count_regions_grid,
    count_regions_segment,
    functional_dimension,
    functional_dimension_bound,
    kmeans,
    parameter_jacobian,
    regions_along_segment,
)
from .network import (
    Restriction,
    TwoLayer,
    coordinate_names,
    forward,
    forward_columns,
    from_flat,
    init_params,
    make_params,
    num_params,
    to_flat,
)

from .diagnostics import ess_bulk, ess_tail, mcse_mean, rhat, rhat_nested
from .posterior.llc import (
    BetaSweep,
    Calibration,
    LLCEstimate,
    calibrate_llc,
    estimate_llc,
    llc_two_layer,
    minimize_loss,
    normal_crossing_expectation,
    restricted_two_layer_loss,
    rlct_from_beta_sweep,
    tempered_losses,
    two_layer_loss,
    two_layer_loss_for,
    wbic,
)
from .sampling import (Draws, HMCSettings, NUTSSettings, SGLDSettings, SMCSettings, chain_mesh, involution_step,
                       pad_chains, run_sharded, sample)
from .posterior.masses import (PhaseMasses, crossover, crossover_bootstrap, effective_runs, log_evidence_mcse, phase_masses,
                       run_weights, trial_filter)
from .moves import OrientationFlip
from .posterior.nested import NestedEvidence, nested_log_evidence
from .posterior import (
    GridPosterior,
    PosteriorSamples,
    Prior,
    SMCPosterior,
    smc_posterior,
    draw_datasets,
    grid_posterior,
    posterior_model,
    resolve_beta,
    sample_posterior,
)

from .arviz_data import load_draws, save_draws, to_arviz

__version__ = "0.1.0"

__all__ = [
    "Gaussian", "NullAccounting", "Quadrature", "Restriction", "TwoLayer", "UniformBox",
    "coordinate_names", "coordinate_slice", "empirical_fisher_information", "empirical_loss",
    "expectation_rule", "feature_jacobian", "fisher_information", "fisher_null_space", "fisher_rank", "fisher_spectrum",
    "forward", "from_flat", "init_params", "loss_slice", "make_params", "null_accounting", "num_params",
    "population_loss", "population_losses", "rank_bound", "sample_dataset", "scaling_generators", "to_flat", "truths",
    # symmetries and phases (Petzka et al. 2020; DSLT3)
    "Irreducible", "PhaseAssignment", "PhaseLabel", "Representative", "annihilating_subsets", "are_equivalent",
    "classify_phase", "NOT_IN_W0", "phase_labels", "phase_name", "effective_weights", "flip_orientation", "merge_nodes", "permute", "radius_rule", "random_symmetry", "reduce",
    "rescale", "reverse_orientation", "sector_phase", "sector_rule", "split_node", "true_set_representatives",
    # deep networks: regions, dual space, functional dimension (Sattelberg et al. 2020; Grigsby et al. 2023)
    "MLP", "Dense", "activation_patterns", "affine_map_between", "cluster_affine_maps", "count_linear_regions",
    "count_regions_box_exact", "count_regions_grid", "count_regions_segment", "dual_points", "flatten_mlp",
    "from_two_layer", "functional_dimension", "functional_dimension_bound", "init_mlp", "kmeans",
    "local_affine_maps", "mlp_forward", "num_mlp_params", "parameter_jacobian", "regions_along_segment",
    "train_mlp", "unflatten_mlp",
    # tempered posteriors, many-chain NUTS, diagnostics (DSLT3, DSLT4)
    "GridPosterior", "PhaseMasses", "PosteriorSamples", "Prior", "crossover", "crossover_bootstrap",
    "draw_datasets", "empirical_loss_columns", "ess_bulk", "ess_tail", "forward_columns", "gaussian_nll", "grid_posterior",
    "mcse_mean", "phase_masses", "posterior_model", "resolve_beta", "rhat", "rhat_nested", "sample_posterior",
    "trial_filter", "run_weights", "log_evidence_mcse", "effective_runs",
    # one sampler interface, many chains on many devices
    "Draws", "HMCSettings", "NUTSSettings", "SGLDSettings", "SMCSettings", "SMCPosterior", "chain_mesh", "pad_chains",
    "run_sharded", "sample", "smc_posterior",
    # moves along the symmetries; a second evidence estimator
    "OrientationFlip", "involution_step", "NestedEvidence", "nested_log_evidence",
    # ArviZ data and netCDF files
    "load_draws", "save_draws", "to_arviz",
    # learning coefficient and free energy (Lau et al. 2023; Watanabe 2013)
    "BetaSweep", "Calibration", "LLCEstimate", "calibrate_llc", "estimate_llc", "llc_two_layer",
    "minimize_loss", "normal_crossing_expectation", "restricted_two_layer_loss", "rlct_from_beta_sweep",
    "tempered_losses", "two_layer_loss", "two_layer_loss_for", "wbic",
]
