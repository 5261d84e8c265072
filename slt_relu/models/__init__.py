"""Models: the protocol every model-generic function takes, the families the toolkit ships, and a user's
network from a function, an Equinox module or a Flax NNX module.

    apply(params, x):  x (n, n_in)  ->  (n,)  or  (n, n_out);   params <-> w (D,)

- ``base``: :class:`Model` (a forward pass and its parameters' structure), :func:`from_function`;
- ``families``: :func:`two_layer` (DSLT3's network), :func:`mlp` (deep ReLU networks), :func:`tms` (the
  toy model of superposition), each with its symmetries' generators;
- ``tms``: the toy model of superposition's parameters, forward pass, data and exact losses;
- ``adapters``: :func:`from_equinox`, :func:`from_flax`;
- ``likelihood``: :class:`GaussianLoss`, the empirical loss L_n(w) of any model under Gaussian noise.
"""
from .adapters import from_equinox, from_flax
from .base import Model, check_model, from_function
from .families import MLPModel, TMSModel, TwoLayerModel, mlp, tms, two_layer
from .likelihood import GaussianLoss, gaussian_loss

__all__ = ["GaussianLoss", "MLPModel", "Model", "TMSModel", "TwoLayerModel", "check_model", "from_equinox",
           "from_flax", "from_function", "gaussian_loss", "mlp", "tms", "two_layer"]
