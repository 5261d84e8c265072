"""slt_relu: loss landscapes and Bayesian posteriors of ReLU networks through singular learning theory.

Public names are fixed by DESIGN.md; each is documented with its formula, shapes and paper.
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
from .loss import coordinate_slice, empirical_loss, loss_slice, population_loss, sample_dataset
from .network import (
    Restriction,
    TwoLayer,
    coordinate_names,
    forward,
    from_flat,
    init_params,
    make_params,
    num_params,
    to_flat,
)

__version__ = "0.1.0"

__all__ = [
    "Gaussian", "NullAccounting", "Quadrature", "Restriction", "TwoLayer", "UniformBox",
    "coordinate_names", "coordinate_slice", "empirical_fisher_information", "empirical_loss",
    "expectation_rule", "feature_jacobian", "fisher_information", "fisher_null_space", "fisher_rank", "fisher_spectrum",
    "forward", "from_flat", "init_params", "loss_slice", "make_params", "null_accounting", "num_params",
    "population_loss", "rank_bound", "sample_dataset", "scaling_generators", "to_flat", "truths",
]
