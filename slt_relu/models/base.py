"""The model protocol: a network f(x; w) as every model-generic function of the toolkit sees it.

    apply(params, x):  x (n, n_in)  ->  f (n,)  or  (n, n_out)

A :class:`Model` is a forward pass over a batch of inputs and the structure of its parameters, a pytree
with a flat view w (D,) (``slt_relu.pytree``).  Whatever needs only a forward pass, a likelihood and data
takes a model: the empirical loss (:class:`~slt_relu.models.GaussianLoss`), tempered posteriors by NUTS,
HMC and SMC (:func:`slt_relu.sample_posterior`), the learning coefficient (:func:`slt_relu.estimate_llc`),
the Fisher information and its rank (``model=``), the Hessian and its rank (``slt_relu.hessian``),
per-sample losses and the observables built on them, ArviZ output.  A family that knows its symmetries
says so by overriding :meth:`Model.scaling_generators` (the two-layer network's node scalings, DSLT3; the
deep MLP's hidden-node scalings); what needs more structure (W0's phases, exact population losses, k-gons)
stays with the family's own functions.

A model is immutable and compared by value where its parts are (a family's forward pass is a module-level
function, its structure a tree, shapes and dtypes), so two equal models share compiled programs; a model
whose forward pass is a closure is equal only to itself.

A user's network enters three ways: :func:`from_function` (a JAX function and example parameters),
:func:`~slt_relu.models.from_equinox` (an Equinox module), :func:`~slt_relu.models.from_flax` (a Flax NNX
module).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..pytree import Unravel, unravel_fn

__all__ = ["Model", "check_model", "from_function"]


@dataclasses.dataclass(frozen=True)
class Model:
    """A network f(x; w): its forward pass on a batch and its parameters' structure.

        apply(params, x): x (n, n_in) -> (n,) or (n, n_out)

    Attributes:
        apply: the forward pass, a JAX function of a parameter pytree and a batch of inputs.
        structure: the parameters' :class:`~slt_relu.pytree.Unravel` (tree, leaf shapes and dtypes): the
            flat view w (D,) of the parameters, leaves in tree order.
        name: how messages and results name the model.
    """

    apply: Callable
    structure: Unravel
    name: str = "network"

    def __call__(self, params, x) -> jax.Array:
        """f(x; params) = apply(params, x)."""
        return self.apply(params, x)

    @property
    def num_params(self) -> int:
        """D, the number of parameters."""
        return self.structure.size

    def ravel(self, params) -> jax.Array:
        """The flat parameters w (D,) of a parameter pytree (its structure checked)."""
        return self.structure.ravel(self.structure.check(params))

    def unravel(self, flat) -> object:
        """The parameter pytree of a flat w (D,)."""
        return self.structure(flat)

    def coordinate_names(self) -> list[str]:
        """The D flat coordinates' names: a leaf's name, with the entry's index for an array leaf
        (``w[0,1]``, ``layers[1].b[0]``, ``c``)."""
        out = []
        for name, shape in zip(self.structure.names or ("params",) * len(self.structure.shapes),
                               self.structure.shapes):
            out += [name] if shape == () else [f"{name}[{','.join(map(str, i))}]" for i in np.ndindex(*shape)]
        return out

    def init(self, key, scale: float = 1.0):
        """Random parameters, every coordinate i.i.d. N(0, scale^2) (generic with probability one)."""
        flat = scale * jax.random.normal(key, (self.num_params,), _float_dtype(self.structure))
        return self.unravel(flat)

    def scaling_generators(self, params) -> jax.Array:
        """The generators of the model's known continuous symmetries at params, as rows (k, D) in the flat
        order: directions v with grad_w f(x; w) . v = 0 for every x, so null directions of the Fisher
        information (:func:`slt_relu.null_accounting`).  A model that knows none returns (0, D)."""
        return jnp.zeros((0, self.num_params), _float_dtype(self.structure))


def _float_dtype(structure: Unravel):
    dtypes = [jnp.dtype(d) for d in structure.dtypes if jnp.issubdtype(jnp.dtype(d), jnp.floating)]
    return jnp.result_type(*dtypes) if dtypes else jnp.zeros(()).dtype


def check_model(model, name: str = "model") -> Model:
    """model if it is a :class:`Model` (a family's, or one made by from_function / from_equinox / from_flax);
    else TypeError naming it."""
    if not isinstance(model, Model):
        raise TypeError(f"{name}: expected a slt_relu.models.Model (slt_relu.models.from_function(apply, params), "
                        f"from_equinox(module), from_flax(module), or a family: two_layer, mlp, tms), got "
                        f"{type(model).__name__}")
    return model


def from_function(apply: Callable, params, *, name: str = "function") -> Model:
    """A user's network from its forward pass and example parameters.

        f(x; w) = apply(params, x),  x (n, n_in) -> (n,) or (n, n_out)

    ``apply`` must be a JAX function of a parameter pytree and a batch of inputs (vmap a function of one
    input first).  Only the structure of ``params`` is kept (tree, leaf shapes and dtypes): the model is
    the family of networks of that shape; pass the parameters themselves where a function needs a point.

    Args:
        apply: the forward pass; hashable functions (a module-level function) let equal models share
            compiled programs.
        params: a pytree of floating arrays (at least one), e.g. ``{"w": (h, n_in), "b": (h,), ...}``.
        name: the model's name in messages and results.

    Returns:
        Model.

    Example:
        >>> def apply(p, x):
        ...     return jnp.tanh(x @ p["w1"].T + p["b1"]) @ p["w2"]
        >>> model = from_function(apply, {"w1": w1, "b1": b1, "w2": w2})
    """
    if not callable(apply):
        raise TypeError(f"apply: expected a function apply(params, x), got {type(apply).__name__}")
    if not isinstance(name, str) or not name:
        raise TypeError(f"name: expected a non-empty string, got {name!r}")
    leaves = jax.tree.leaves(params)
    if not leaves:
        raise ValueError("params: expected a pytree with at least one array, got none")
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        dtype = getattr(leaf, "dtype", None) or np.asarray(leaf).dtype
        if not jnp.issubdtype(dtype, jnp.floating):
            raise TypeError(f"params{jax.tree_util.keystr(path)}: expected a floating array, got {dtype}")
    return Model(apply, unravel_fn(params)[1], name)
