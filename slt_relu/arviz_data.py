"""Posterior draws, SMC particles and LLC traces as ArviZ data: an ``xarray.DataTree`` built with
arviz-base, saved as netCDF (h5netcdf) and read back with ``xarray.open_datatree``.

ArviZ's data model (the InferenceData schema, as a DataTree): groups ``posterior`` and
``sample_stats`` whose variables lead with the sample dimensions (``chain``, ``draw``),
``constant_data`` and ``observed_data`` without them.  Here:

* ``posterior``: the parameters of f(x, w) = c + sum_i q_i relu(<w_i, x> + b_i) (docs/design.md) as
  w (chain, draw, dataset, node, input), b and q (chain, draw, dataset, node), c (chain, draw,
  dataset) (any other model's parameters: a variable per leaf of its pytree, named by the leaf's path,
  its axes ``NAME_dim_0``, ...), and ``loss`` = L_n(w) on the chain's own data set.  The data set is a dimension of
  its own, not part of ``chain``: chains on different data sets sample different posteriors
  (DSLT4's trials), so ArviZ's R-hat, ESS and ``summary`` are computed per data set and never
  pool trials by accident.  ``chain`` numbers the chains (MCMC) or independent runs (SMC) of one
  data set; for SMC, ``draw`` numbers the particles (equally weighted after the last resampling).
* ``sample_stats``: MCMC (numpyro's NUTS and HMC, desynchronised or lockstep; ArviZ's names):
  ``diverging``, ``n_steps`` (leapfrog steps), ``tree_depth`` (NUTS: floor(log2 n_steps) + 1),
  ``acceptance_rate``, ``energy`` (the Hamiltonian at the draw), ``lp`` (log density = -U),
  ``step_size`` (per draw), and per chain ``inverse_mass_matrix`` (chain, dataset, unconstrained),
  ``warmup_divergences``, ``grad_evals``, with symmetry moves ``symmetry_accept`` (the flips'
  accepted fraction).  SMC: ``log_evidence`` and ``num_stages``
  (chain, dataset), and per stage (chain, dataset, stage) the tempering ``lambda``, the incremental
  weights' ``ess`` fraction, the moves' ``acceptance_rate`` and ``step_size``.  LLC (SGLD):
  ``acceptance_rate`` (MALA's, per chain) and ``llc`` (each chain's estimate).
* ``constant_data``: ``n_beta`` (dataset).  ``observed_data``: x (dataset, obs, input) and
  y (dataset, obs) when given and small.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["jax_leaves", "llc_tree", "load_draws", "posterior_tree", "save_draws", "to_arviz"]

OBSERVED_MAX = 1_000_000          # values of x and y at most, else observed_data is left out


def jax_leaves(tree) -> list:
    """The leaves of a pytree in tree order."""
    import jax

    return jax.tree.leaves(tree)


def _by_dataset(dataset) -> np.ndarray:
    """(R, K) chain indices: the r-th chain of data set k (every data set needs R chains)."""
    dataset = np.asarray(dataset)
    groups, counts = np.unique(dataset, return_counts=True)
    if counts.min() != counts.max():
        raise ValueError(f"dataset: expected the same number of chains per data set, got counts {counts.tolist()}")
    return np.stack([np.flatnonzero(dataset == g) for g in groups], 1)


def _arrange(a, idx, per_draw: bool) -> np.ndarray:
    """(C, S, ...) -> (R, S, K, ...) or (C, ...) -> (R, K, ...)."""
    a = np.asarray(a)[idx]                              # (R, K, ...)
    return np.moveaxis(a, 2, 1) if per_draw else a


def _dataset(data: dict, dims: dict, coords: dict, attrs: dict | None = None):
    from arviz_base import dict_to_dataset

    used = {d for name in data for d in dims[name]}
    return dict_to_dataset(data, dims={k: v[1:] for k, v in dims.items() if k in data}, sample_dims=["chain"],
                           coords={k: v for k, v in coords.items() if k in used}, attrs=attrs,
                           check_conventions=False)


def posterior_tree(params, loss, dataset, info=None, *, log_evidence=None, n_beta=None,
                   potential_energy=None, grad_evals=None, observed=None, attrs: dict | None = None):
    """The ArviZ DataTree of C chains (or SMC runs) of S draws (or particles) each (module docstring).

    params: TwoLayer with leaves (C, S, ...) (variables w, b, q, c), or any model's parameters with leaves
    (C, S, ...) (a variable per leaf, named by its path: ``layers_0_w``); loss: (C, S); dataset: (C,) data set of each chain
    (equally many chains per data set); info: the sampler's statistics (``Draws.info``: per draw
    (C, S), per chain (C, ...), SMC per stage (C, M)) or None; log_evidence: (C,) for SMC; n_beta: (C,);
    potential_energy: (C, S) U at each draw; grad_evals: (C,); observed: (x (K, n, n_in),
    y (K, n)) or None; attrs: extra attributes of the root (e.g. the sampler's name)."""
    import xarray as xr
    from arviz_base import make_attrs

    from .network import TwoLayer
    from .pytree import leaf_names
    from .sampling import info_dict

    stats = {} if info is None else info_dict(info)
    idx = _by_dataset(dataset)
    R, K = idx.shape
    C, S = np.shape(loss)
    coords = {"chain": np.arange(R), "draw": np.arange(S), "dataset": np.arange(K)}
    dims = {"loss": ["chain", "draw", "dataset"]}
    if isinstance(params, TwoLayer):
        d, n_in = np.shape(params.w)[-2:]
        coords.update({"node": np.arange(d), "input": np.arange(n_in)})
        dims.update({"w": ["chain", "draw", "dataset", "node", "input"], "b": ["chain", "draw", "dataset", "node"],
                     "q": ["chain", "draw", "dataset", "node"], "c": ["chain", "draw", "dataset"]})
        post = {name: _arrange(getattr(params, name), idx, True) for name in ("w", "b", "q", "c")}
    else:                                   # any model's parameters: a variable per leaf, named by its path
        post = {}
        for name, leaf in zip(leaf_names(params), jax_leaves(params)):
            var = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name).strip("_") or "params"
            leaf = np.asarray(leaf)
            extra = [f"{var}_dim_{i}" for i in range(leaf.ndim - 2)]
            coords.update({e: np.arange(n) for e, n in zip(extra, leaf.shape[2:])})
            dims[var] = ["chain", "draw", "dataset"] + extra
            post[var] = _arrange(leaf, idx, True)
    post["loss"] = _arrange(loss, idx, True)
    groups = {"posterior": _dataset(post, dims, coords, {"loss": "L_n(w) on the chain's own data set"})}

    ss, sdims = {}, {}
    smc = log_evidence is not None
    per_draw = {"diverging": "diverging", "num_steps": "n_steps", "tree_depth": "tree_depth",
                "accept_prob": "acceptance_rate", "energy": "energy"}
    if smc:
        stages = int(np.max(stats.get("num_stages", [0]))) if "num_stages" in stats else 0
        ss["log_evidence"], sdims["log_evidence"] = _arrange(log_evidence, idx, False), ["chain", "dataset"]
        for name, new in (("num_stages", "num_stages"), ("final_lambda", "final_lambda")):
            if name in stats:
                ss[new], sdims[new] = _arrange(stats[name], idx, False), ["chain", "dataset"]
        for name, new in (("lambda", "lambda"), ("ess", "ess"), ("accept_prob", "acceptance_rate"),
                          ("step_size", "step_size")):
            if name in stats:
                ss[new] = _arrange(np.asarray(stats[name])[:, :stages], idx, False)
                sdims[new] = ["chain", "dataset", "stage"]
        coords["stage"] = np.arange(stages)
    else:
        for name, new in per_draw.items():
            if name in stats:
                ss[new], sdims[new] = _arrange(stats[name], idx, True), ["chain", "draw", "dataset"]
        if "step_size" in stats:
            step = np.asarray(stats["step_size"])
            step = step if step.ndim == 2 else np.broadcast_to(step[:, None], (C, S))
            ss["step_size"], sdims["step_size"] = _arrange(step, idx, True), ["chain", "draw", "dataset"]
        if potential_energy is not None:
            ss["lp"], sdims["lp"] = -_arrange(potential_energy, idx, True), ["chain", "draw", "dataset"]
        if "inverse_mass_matrix" in stats:
            imm = np.asarray(stats["inverse_mass_matrix"])
            ss["inverse_mass_matrix"] = _arrange(imm, idx, False)
            sdims["inverse_mass_matrix"] = ["chain", "dataset"] + [f"unconstrained_{k}" for k in range(imm.ndim - 1)]
            coords.update({f"unconstrained_{k}": np.arange(n) for k, n in enumerate(imm.shape[1:])})
        if "warmup_divergences" in stats:
            ss["warmup_divergences"] = _arrange(stats["warmup_divergences"], idx, False)
            sdims["warmup_divergences"] = ["chain", "dataset"]
        if "symmetry_accept" in stats:
            ss["symmetry_accept"] = _arrange(stats["symmetry_accept"], idx, False)
            sdims["symmetry_accept"] = ["chain", "dataset"]
    if grad_evals is not None:
        ss["grad_evals"], sdims["grad_evals"] = _arrange(grad_evals, idx, False), ["chain", "dataset"]
    if ss:
        groups["sample_stats"] = _dataset(ss, sdims, coords)
    if n_beta is not None:
        per_dataset = np.asarray(n_beta, np.float64)[idx[0]]
        groups["constant_data"] = xr.Dataset({"n_beta": ("dataset", per_dataset)}, coords={"dataset": np.arange(K)},
                                             attrs=make_attrs())
    if observed is not None:
        x, y = (np.asarray(a) for a in observed)
        if x.size + y.size <= OBSERVED_MAX:
            x_dims = ("dataset", "obs") + tuple(f"input_dim_{i}" if i else "input" for i in range(x.ndim - 2))
            y_dims = ("dataset", "obs") + tuple(f"output_dim_{i}" if i else "output" for i in range(y.ndim - 2))
            groups["observed_data"] = xr.Dataset(
                {"x": (x_dims, x), "y": (y_dims, y)},
                coords={**{d: np.arange(n) for d, n in zip(x_dims, x.shape)},
                        **{d: np.arange(n) for d, n in zip(y_dims, y.shape)}}, attrs=make_attrs())
    tree = xr.DataTree.from_dict(groups)
    tree.attrs = make_attrs({"library": "slt_relu", **{k: v for k, v in (attrs or {}).items() if v is not None}})
    return tree


def llc_tree(est, attrs: dict | None = None):
    """The ArviZ DataTree of a local SGLD estimate (a :class:`~slt_relu.posterior.learning_coefficient.LambdaEstimate`
    of :func:`~slt_relu.posterior.llc.estimate_llc`, details :class:`~slt_relu.posterior.llc.LocalSGLD`):
    posterior ``loss`` (chain, draw), the L_n trace of each SGLD chain; sample_stats ``acceptance_rate`` (MALA's)
    and ``llc`` per chain; the estimate, its standard error, L_n(w*), n beta and R-hat as attributes."""
    import xarray as xr
    from arviz_base import make_attrs

    d = est.details
    trace = np.asarray(d.loss_trace)
    C, T = trace.shape
    coords = {"chain": np.arange(C), "draw": np.arange(T)}
    post = _dataset({"loss": trace}, {"loss": ["chain", "draw"]}, coords)
    ss = _dataset({"acceptance_rate": np.asarray(d.accept_prob), "llc": np.asarray(d.per_chain)},
                  {"acceptance_rate": ["chain"], "llc": ["chain"]}, coords)
    tree = xr.DataTree.from_dict({"posterior": post, "sample_stats": ss})
    tree.attrs = make_attrs({"library": "slt_relu", "llc_estimate": float(est.lambda_), "llc_se": float(est.se),
                             "init_loss": float(d.init_loss), "n_beta": float(d.n_beta), "rhat": float(d.rhat),
                             **(attrs or {})})
    return tree


def to_arviz(result, *, observed=None):
    """ArviZ data (an ``xarray.DataTree`` with ArviZ's groups, built with arviz-base) of a result.

    The data set is a dimension of its own, never part of ``chain`` (module docstring for the
    variables and dimensions).

    Args:
        result: :class:`~slt_relu.posterior.PosteriorSamples` (NUTS, HMC or SMC through
            ``sample_posterior``), :class:`~slt_relu.posterior.SMCPosterior` (each run its own data
            set) or a local SGLD estimate (the :class:`~slt_relu.posterior.learning_coefficient.LambdaEstimate`
            of :func:`~slt_relu.posterior.llc.estimate_llc`).
        observed: (x (K, n, n_in), y (K, n)) the data sets, stored as ``observed_data`` when small.

    Returns:
        xarray.DataTree with groups ``posterior``, ``sample_stats``, ``constant_data`` (and
        ``observed_data``).
    """
    from .posterior import PosteriorSamples, SMCPosterior
    from .posterior.learning_coefficient import LambdaEstimate
    from .posterior.llc import LocalSGLD

    if isinstance(result, LambdaEstimate) and isinstance(result.details, LocalSGLD):
        return llc_tree(result)
    if isinstance(result, SMCPosterior):
        d = result.draws
        return posterior_tree(result.params, result.loss, np.arange(len(result.log_evidence)), d.info,
                              log_evidence=result.log_evidence, n_beta=result.n_beta, grad_evals=d.grad_evals,
                              observed=observed, attrs={"sampler": "smc"})
    if isinstance(result, PosteriorSamples):
        d = result.draws
        smc = d.log_evidence is not None
        return posterior_tree(result.params, result.loss, result.dataset, d.info, log_evidence=d.log_evidence,
                              n_beta=result.n_beta, potential_energy=None if smc else d.potential_energy,
                              grad_evals=d.grad_evals, observed=observed, attrs={"sampler": "smc" if smc else "mcmc"})
    what = f"a LambdaEstimate of {result.method}" if isinstance(result, LambdaEstimate) else type(result).__name__
    raise TypeError(f"result: expected PosteriorSamples, SMCPosterior or estimate_llc's LambdaEstimate, got {what}")


def save_draws(tree, path) -> Path:
    """Write a DataTree to ``path`` as netCDF (h5netcdf, compressed), atomically.

    The file is written under a temporary name, then renamed (``slt_relu.netcdf.write_tree``).

    Args:
        tree: an ``xarray.DataTree`` (e.g. from :func:`to_arviz`).
        path: the file to write.

    Returns:
        Path: ``path``.
    """
    from .netcdf import write_tree

    return write_tree(tree, path)


def load_draws(path):
    """Read a netCDF file written by :func:`save_draws` into memory (``xarray.open_datatree``).

    Args:
        path: the file.

    Returns:
        xarray.DataTree, loaded.
    """
    from .netcdf import read_tree

    return read_tree(path)
