"""Exact learning coefficients and the loss families that have them.

The free energy of a tempered posterior at inverse temperature t = n beta satisfies

    F(t) = t L* + lambda log t - (m - 1) log log t + O(1),

lambda the real log canonical threshold (RLCT) of K at the true parameters and m its order
(Watanabe 2009, "Algebraic geometry and statistical learning theory").

- ``values``: (lambda, m) in closed form: normal crossings, regular models, the minimal two-layer ReLU
  network and the phases of W0 of a two-layer network, reduced-rank regression, deep linear networks;
- ``losses``: those families' losses as jit-static callables: the population losses K and a data set's loss
  from its sufficient statistics, with the statistics' sampler;
- ``phase``: the local potential of one phase of W0 of a two-layer ReLU network on a fixed gauge-fixed
  region, and its first-principles (lambda, m).

The functions of ``values`` are attributes of this package too (``slt_relu.known_lambda.normal_crossing``).
"""
from . import losses, phase, values
from .values import deep_linear, minimal_two_layer_relu, normal_crossing, reduced_rank, regular, two_layer_phase

__all__ = ["deep_linear", "losses", "minimal_two_layer_relu", "normal_crossing", "phase", "reduced_rank", "regular",
           "two_layer_phase", "values"]
