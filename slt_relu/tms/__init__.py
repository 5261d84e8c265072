"""The toy model of superposition (TMS) as a model family of the toolkit (Chen, Lau, Mendel, Wei,
Murfet 2023, arXiv 2310.06301).

    f(x; W, b) = ReLU(W^T W x + b),  W: (2, c),  b: (c,);  x = mu e_i,  i ~ U{1..c},  mu ~ U[0, 1];
    L(w) = E ||x - f(x; w)||^2,   L_n(w) = (1/n) sum_k ||x_k - f(x_k; w)||^2.

- the model itself (``TMSParams``, the flat order, forward, data, the empirical loss and the exact
  population loss, closed form on the pieces between ReLU kinks) is a family of ``slt_relu.models``
  (``slt_relu.models.tms``), re-exported here;
- ``symmetry``: O(2) acting on W and feature permutations as operations;
- ``fisher``: the exact Fisher information E[J^T J] and its rank;
- ``kgon``: the regular k-gons, their refined length and bias, their exact loss;
- ``critical_points``: each k-gon's criticality, Hessian, Fisher rank and first-principles learning
  coefficient, and the table;
- ``local_lambda``: lambda at a k-gon minimum from tempered SMC's free-energy curve of its local potential;
- ``phases``: the k-gon label of a posterior draw or a training checkpoint;
- ``sorted_loss``: the exact empirical loss from sorted inputs, O(c^2 log n);
- ``transition``: the posterior mass of each k-gon phase against n by tempered SMC;
- ``crossover``: the n where two phases exchange the lead, measured and by the asymptotic formula, and the
  phase of least asymptotic free energy along n;
- ``transition_checks``: checks of a measured transition (the SMC settings, the labelling rule, the phases'
  local free energies against their asymptotic form);
- ``training``: optax training runs from random starts at several n, the k-gon of every checkpoint;
- ``training_llc``: the local learning coefficient at the checkpoints (SGLD) and its quadratic expectation.

The empirical loss plugs into the tempered target of any loss
(``slt_relu.posterior.target.TemperedTarget``), ``estimate_llc`` (``empirical_loss`` on
``TMSParams``) and ``smc_free_energy_curve`` (``flat_empirical_loss`` / ``flat_population_loss`` on
flat parameters).
"""
from . import (critical_points, crossover, fisher, kgon, local_lambda, phases, sorted_loss, symmetry, training,
               training_llc, transition, transition_checks)
from .critical_points import KGonRecord, hessian_counts, kgon_record, kgon_table, loss_hessian
from .fisher import fisher_information, fisher_rank, fisher_spectrum
from .kgon import kgon_loss_formula, make_kgon, positive_unused_bias, refine_kgon, refined_kgon
from ..models.tms import (TMSParams, empirical_loss, flat_empirical_loss, flat_population_loss, forward, from_flat,
                    make_params, num_params, population_loss, sample_inputs, to_flat)
from .phases import NONE, PhaseLabel, label, label_name, label_names
from .symmetry import permute_features, permute_inputs, reflection, rotate, rotation, rotation_generator

__all__ = ["critical_points", "crossover", "empirical_loss", "fisher", "fisher_information", "fisher_rank", "fisher_spectrum",
           "flat_empirical_loss", "flat_population_loss", "forward", "from_flat", "hessian_counts", "kgon",
           "kgon_loss_formula", "kgon_record", "kgon_table", "KGonRecord", "label", "label_name", "label_names",
           "local_lambda", "loss_hessian", "make_kgon", "make_params", "NONE", "num_params", "permute_features",
           "permute_inputs", "PhaseLabel", "phases", "population_loss", "positive_unused_bias", "refine_kgon",
           "refined_kgon", "reflection", "rotate", "rotation", "rotation_generator", "sample_inputs", "sorted_loss",
           "symmetry", "TMSParams", "to_flat", "transition", "transition_checks"]
