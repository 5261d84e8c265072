"""A user's network from the JAX neural-network libraries, as a :class:`~slt_relu.models.Model` and its
parameters.

- :func:`from_equinox`: an Equinox module (Kidger & Garcia 2021).  Its floating arrays are the parameters,
  everything else (activations, sizes) is the fixed part; Equinox modules act on one input, so the
  forward pass is vmapped over the batch.
- :func:`from_flax`: a Flax NNX module.  Its ``nnx.Param`` variables are the parameters, any other state
  is held fixed; NNX layers act on batches.

Each returns ``(model, params)``: the model (the network's forward pass and its parameters' structure,
what every generic function takes) and the module's own parameters as a pytree (a point to sample from,
localise at, or compute a Fisher rank at).  Neither library is imported until an adapter is called; both
are test dependencies (``pip install equinox flax``), not requirements of the toolkit.
"""
from __future__ import annotations

import dataclasses

import jax

from .base import Model, from_function

__all__ = ["EquinoxApply", "FlaxApply", "from_equinox", "from_flax"]


@dataclasses.dataclass(frozen=True)
class EquinoxApply:
    """f(x) of an Equinox module's fixed part with parameters ``params``, vmapped over the rows of x; hashable
    by value (the fixed part's), so equal modules share compiled programs."""

    static: object

    def __call__(self, params, x):
        import equinox as eqx

        return jax.vmap(eqx.combine(params, self.static))(x)


def from_equinox(module, *, name: str | None = None) -> tuple[Model, object]:
    """An Equinox module as (model, params).

    Args:
        module: an ``equinox.Module`` mapping one input (n_in,) to an output () or (n_out,) (e.g.
            ``eqx.nn.MLP(n_in, "scalar", width, depth, activation=jax.nn.relu, key=key)``).
        name: the model's name (default: the module's class name).

    Returns:
        (model, params): params holds the module's floating arrays (``eqx.partition(module,
        eqx.is_inexact_array)``), the model's forward pass ``apply(params, x (n, n_in))`` vmaps the module.
    """
    import equinox as eqx

    if not isinstance(module, eqx.Module):
        raise TypeError(f"module: expected an equinox.Module, got {type(module).__name__}")
    params, static = eqx.partition(module, eqx.is_inexact_array)
    return from_function(EquinoxApply(static), params, name=name or type(module).__name__), params


@dataclasses.dataclass(frozen=True, eq=False)
class FlaxApply:
    """f(x) of a Flax NNX module rebuilt from its graph, parameters ``params`` and its other state (held
    fixed); equal only to itself."""

    graphdef: object
    rest: object

    def __call__(self, params, x):
        from flax import nnx

        return nnx.merge(self.graphdef, params, self.rest)(x)


def from_flax(module, *, name: str | None = None) -> tuple[Model, object]:
    """A Flax NNX module as (model, params).

    Args:
        module: an ``flax.nnx.Module`` mapping a batch of inputs (n, n_in) to outputs (n,) or (n, n_out)
            (e.g. a stack of ``nnx.Linear`` layers with ReLU between them).
        name: the model's name (default: the module's class name).

    Returns:
        (model, params): params the module's ``nnx.Param`` state (an ``nnx.State`` pytree); any other state
        (batch statistics, RNG counters) is held at its current value.
    """
    from flax import nnx

    if not isinstance(module, nnx.Module):
        raise TypeError(f"module: expected a flax.nnx.Module, got {type(module).__name__}")
    graphdef, params, rest = nnx.split(module, nnx.Param, ...)
    return from_function(FlaxApply(graphdef, rest), params, name=name or type(module).__name__), params
