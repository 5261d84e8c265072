"""The prior phi(w) of a tempered posterior: one type for every model and every sampler.

    phi(w) = prod_i p_(g(i))(w_i),   p_g = N(0, s_g^2) ("normal", s)  or  U[-a_g, a_g] ("uniform", a),

independent per coordinate, each coordinate's law set by its group g(i): the first step of its leaf's path
in the parameter pytree (a two-layer network's w, b, q, c; an MLP's ``layers``; a dict's keys; a module's
fields; ``slt_relu.pytree``).  Groups not named take the default.

Samplers run on unconstrained coordinates z (D,): w = T(z) coordinatewise, T the identity for a normal
coordinate and T(z) = -a + 2a sigmoid(z) for a uniform one (numpyro's ``biject_to`` of the interval), so

    -log phi(T(z)) - log |det dT/dz| = sum_normal (z_i^2 / (2 s^2) + log(s sqrt(2 pi)))
                                        + sum_uniform (softplus(z_i) + softplus(-z_i)),

what :class:`FlatPrior` computes for the tempered target (``slt_relu.posterior.target``).

References:
    DSLT4 (the phase transition experiments' N(0, 1) priors).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["FlatPrior", "PRIOR_KINDS", "Prior"]

PRIOR_KINDS = ("normal", "uniform")
"""The priors of a group of coordinates, N(0, scale^2) or U[-scale, scale] per coordinate."""


def _check_spec(spec, name: str) -> tuple[str, float]:
    ok = (isinstance(spec, (tuple, list)) and len(spec) == 2 and spec[0] in PRIOR_KINDS
          and isinstance(spec[1], (int, float, np.integer, np.floating)) and not isinstance(spec[1], bool)
          and math.isfinite(spec[1]) and spec[1] > 0)
    if not ok:
        raise ValueError(f"{name}: expected (kind, scale) with kind in {PRIOR_KINDS} and a finite scale > 0, "
                         f"got {spec!r}")
    return str(spec[0]), float(spec[1])


class Prior:
    """The prior phi(w) of any model (module docstring): a default law and one per named group.

        Prior()                                   every coordinate N(0, 1)
        Prior(("normal", 2.0))                    every coordinate N(0, 4)
        Prior(w=("uniform", 2.0), q=("normal", 0.5))   a two-layer network's w ~ U[-2, 2], q ~ N(0, 1/4)

    Args:
        default: (kind, scale) of the groups not named, kind "normal" (scale: the standard deviation) or
            "uniform" (scale: the half width).
        **groups: (kind, scale) of a group of the parameters by its name.

    Hashable by value: a static argument of compiled programs.
    """

    __slots__ = ("default", "groups")

    def __init__(self, default=("normal", 1.0), **groups):
        object.__setattr__(self, "default", _check_spec(default, "prior.default"))
        object.__setattr__(self, "groups", tuple(sorted((g, _check_spec(s, f"prior.{g}")) for g, s in groups.items())))

    def __setattr__(self, name, value):
        raise AttributeError("Prior is immutable")

    @classmethod
    def normal(cls, std: float = 1.0) -> "Prior":
        """N(0, std^2) on every coordinate."""
        return cls(("normal", std))

    @classmethod
    def uniform(cls, half_width: float) -> "Prior":
        """U[-half_width, half_width] on every coordinate."""
        return cls(("uniform", half_width))

    def spec(self, group: str) -> tuple[str, float]:
        """(kind, scale) of a group."""
        return dict(self.groups).get(group, self.default)

    def __eq__(self, other):
        return isinstance(other, Prior) and (self.default, self.groups) == (other.default, other.groups)

    def __hash__(self):
        return hash((Prior, self.default, self.groups))

    def __repr__(self):
        named = "".join(f", {g}={s!r}" for g, s in self.groups)
        return f"Prior({self.default!r}{named})"

    def distribution(self, group: str, size: int):
        """The numpyro distribution of ``size`` coordinates of a group (``posterior_model``'s sample sites)."""
        import numpyro.distributions as dist

        kind, scale = self.spec(group)
        base = dist.Normal(0.0, scale) if kind == "normal" else dist.Uniform(-scale, scale)
        return base.expand([size]).to_event(1)

    def on(self, segments, where: str = "the model's") -> "FlatPrior":
        """The prior on flat coordinates whose groups are ``segments``: (group, start, stop) in order, as
        ``Unravel.segments()`` gives them.  ValueError naming a group the parameters do not have."""
        names = {g for g, _, _ in segments}
        for g, _ in self.groups:
            if g not in names:
                raise ValueError(f"prior.{g}: expected a group of {where} parameters ({', '.join(sorted(names))}), "
                                 f"got {g!r}")
        merged = []
        for g, start, stop in segments:
            kind, scale = self.spec(g)
            if merged and merged[-1][1] == start and merged[-1][2:] == (kind, scale):
                merged[-1] = (merged[-1][0], stop, kind, scale)
            elif stop > start:
                merged.append((start, stop, kind, scale))
        size = segments[-1][2] if segments else 0
        return FlatPrior(tuple(merged), size)


class FlatPrior(NamedTuple):
    """A :class:`Prior` on flat coordinates w (D,): contiguous segments (start, stop, kind, scale) covering
    0 .. D, and the map T between unconstrained z and w (module docstring); hashable by value."""

    segments: tuple
    size: int

    @property
    def bounded(self) -> bool:
        """Whether some coordinate has a uniform prior (T is not the identity)."""
        return any(kind == "uniform" for _, _, kind, _ in self.segments)

    def _scales(self, dtype):
        """(scale (D,), uniform mask (D,)) as numpy arrays (static)."""
        scale, uniform = np.ones(self.size), np.zeros(self.size, bool)
        for start, stop, kind, s in self.segments:
            scale[start:stop], uniform[start:stop] = s, kind == "uniform"
        return jnp.asarray(scale, dtype), uniform

    def constrain(self, z):
        """w = T(z): the identity on normal coordinates, -a + 2a sigmoid(z) on uniform ones."""
        if not self.bounded:
            return z
        scale, uniform = self._scales(z.dtype)
        return jnp.where(uniform, scale * (2.0 * jax.nn.sigmoid(z) - 1.0), z)

    def unconstrain(self, w):
        """z = T^(-1)(w) (NaN off a uniform coordinate's support)."""
        if not self.bounded:
            return w
        scale, uniform = self._scales(w.dtype)
        u = (w + scale) / (2.0 * scale)
        return jnp.where(uniform, jnp.log(u) - jnp.log1p(-u), w)

    def potential(self, z):
        """-log phi(T(z)) - log |det dT/dz|, the prior's part of the potential (module docstring)."""
        total = jnp.zeros((), z.dtype)
        for start, stop, kind, s in self.segments:
            part = z[start:stop]
            if kind == "normal":
                total = total + jnp.sum(0.5 * (part / s) ** 2) + (stop - start) * math.log(s * math.sqrt(2 * math.pi))
            else:
                total = total + jnp.sum(jax.nn.softplus(part) + jax.nn.softplus(-part))
        return total

    def log_jacobian(self, z):
        """log |det dT/dz| = sum over uniform coordinates of log(2a) + log sigmoid(z) + log sigmoid(-z)."""
        total = jnp.zeros((), z.dtype)
        for start, stop, kind, s in self.segments:
            if kind == "uniform":
                part = z[start:stop]
                total = total + (stop - start) * math.log(2 * s) - jnp.sum(jax.nn.softplus(part) + jax.nn.softplus(-part))
        return total

    def log_density(self, w):
        """log phi(w) at constrained w (-inf off a uniform coordinate's support)."""
        total = jnp.zeros((), w.dtype)
        for start, stop, kind, s in self.segments:
            part = w[start:stop]
            if kind == "normal":
                total = total - jnp.sum(0.5 * (part / s) ** 2) - (stop - start) * math.log(s * math.sqrt(2 * math.pi))
            else:
                inside = jnp.all(jnp.abs(part) <= s)
                total = total + jnp.where(inside, -(stop - start) * math.log(2 * s), -jnp.inf)
        return total

    def sample(self, key, dtype):
        """One draw of phi in the unconstrained coordinates z (D,)."""
        k_n, k_u = jax.random.split(key)
        scale, uniform = self._scales(dtype)
        normal = scale * jax.random.normal(k_n, (self.size,), dtype)
        if not self.bounded:
            return normal
        w = jax.random.uniform(k_u, (self.size,), dtype, -1.0, 1.0) * scale
        return jnp.where(uniform, self.unconstrain(jnp.where(uniform, w, 0.0)), normal)
