"""Memory a run needs, checked before it starts: a config whose arrays cannot fit in the memory this
machine has is refused with one line naming the keys that size them and the estimate, e.g.
``landscape.n: 10^12 points need ~8.0 TB at least; this machine has 23.1 GB available``.

Each estimate is a lower bound on the run's peak: the size of one array the kind must hold at once
(a data set, the kept draws of one sweep point, one batch of forward passes, a Fisher matrix), counted
from the settings alone. A run refused here could never have finished; a run that passes may still be
too large for other reasons (XLA's temporaries), which the estimates do not try to predict. One
exception: under SMC's stopping rule a sweep point is counted at the bounds the rule may grow it to
(max_chains_per_dataset runs of max_particles particles), so a run is refused before it could reach
them, though one that met its targets early would have fit.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ..settings import ConfigError
from ..sampling import SMCSettings


class Need(NamedTuple):
    """An array a run must hold: the keys that size it, what it is, how many floats."""
    keys: str
    what: str
    elements: float


def params(width: int, n_in: int) -> int:
    """D = width (n_in + 2) + 1, the parameters of a two-layer network."""
    return width * (n_in + 2) + 1


def human(n_bytes: float) -> str:
    """Bytes in decimal units: '8.0 TB'."""
    for unit in ("B", "kB", "MB", "GB", "TB", "PB", "EB"):
        if n_bytes < 1000 or unit == "EB":
            return f"{n_bytes:.1f} {unit}" if unit != "B" else f"{n_bytes:.0f} B"
        n_bytes /= 1000
    return f"{n_bytes:.1f} EB"


def _width_keys(s) -> str:
    """', truth.m' where the truth's size comes from the config (m-symmetric truths)."""
    return ", truth.m" if getattr(getattr(s, "truth", None), "m", None) is not None else ""


def _truth_size(s) -> tuple[int, int]:
    """(width, n_in) of the model of a config's example ([inputs] n_in where it says one); (1, 1), a lower
    bound, where the example cannot be built (its own one-line error follows when the run resolves it)."""
    from .. import truths

    truth, inputs = getattr(s, "truth", None), getattr(s, "inputs", None)
    width, n_in = 1, 1
    if truth is not None:
        try:
            base = truths.get(truth.name, **truth.model_dump(exclude={"name"})).model.base
            width, n_in = base.width, base.n_in
        except (ValueError, TypeError):
            pass
    if inputs is not None and inputs.n_in:
        n_in = inputs.n_in
    return width, n_in


def _quadrature_points(s) -> int:
    """Points of the 2-D tensor rule of Gaussian inputs ((cells x order)^2), 0 for other inputs."""
    inputs = getattr(s, "inputs", None)
    if inputs is not None and getattr(inputs, "distribution", None) == "gaussian":
        return (inputs.cells * inputs.order) ** 2
    return 0


def _landscape(s) -> list[Need]:
    t = s.landscape
    width, n_in = _truth_size(s)
    out = [Need("landscape.resolution" + _width_keys(s), "the grid of parameters", t.resolution ** 2 * params(width, n_in))]
    if t.loss == "empirical":
        out += [Need("landscape.n", f"the data set of {t.n:.3g} points", t.n * (n_in + 1)),
                Need("landscape.n", "one batch of forward passes over the data", min(256, t.resolution ** 2) * t.n
                     * width)]
    if _quadrature_points(s):
        out.append(Need("inputs.cells, inputs.order", "one batch of forward passes over the quadrature points",
                        min(256, t.resolution ** 2) * _quadrature_points(s) * width))
    return out


def _fisher(s) -> list[Need]:
    out = []
    width, n_in = _truth_size(s)
    for i, group in enumerate(s.fisher.points):
        widths = list(getattr(group, "widths", None) or [getattr(group, "width", None) or width])
        D = params(max(widths), n_in)
        out.append(Need(f"fisher.points[{i}]" + _width_keys(s), f"a {D} x {D} Fisher matrix", D * D))
        if _quadrature_points(s):
            out.append(Need(f"fisher.points[{i}], inputs.cells", "the Jacobian at the quadrature points",
                            _quadrature_points(s) * D))
    return out


def _posterior(s) -> list[Need]:
    p, sampler = s.posterior, s.sampler
    width = s.model.width or _truth_size(s)[0]
    n_in = _truth_size(s)[1]
    D = params(width, n_in)
    runs = p.datasets * p.chains_per_dataset
    out = [Need("posterior.n, posterior.datasets", "the data sets of one sweep point", p.datasets * p.n * (n_in + 1))]
    if isinstance(sampler, SMCSettings):
        particles = sampler.num_particles
        if s.convergence.active:                          # the stopping rule may add runs and grow their particles
            runs = p.datasets * max(p.chains_per_dataset, s.convergence.max_chains_per_dataset)
            particles = max(particles, s.convergence.max_particles or 0)
        out += [Need("sampler.num_particles, posterior.datasets, posterior.chains_per_dataset, "
                     "convergence.max_chains_per_dataset, convergence.max_particles", "the particles of one sweep point",
                     runs * particles * D),
                Need("posterior.n, sampler.particle_batch", "one batch of forward passes over the data",
                     runs * min(sampler.particle_batch, particles) * p.n * width)]
    else:
        out += [Need("sampler.num_samples, posterior.datasets, posterior.chains_per_dataset",
                     "the kept draws of one sweep point", runs * sampler.num_samples * D),
                Need("posterior.n, posterior.datasets, posterior.chains_per_dataset",
                     "one forward pass of every chain over its data", runs * p.n * width)]
    return out


def _learning_coefficient(s) -> list[Need]:
    llc = s.llc
    width = max([getattr(c, "width", None) or 1 for c in s.cases])
    D = params(width, 1)
    sg, bs = llc.sgld, llc.beta_sweep
    kept = max(sg.num_steps - sg.num_burnin, 1) // sg.thin
    betas = len(getattr(bs, "factors", ()) or (1,))
    return [Need("llc.n", "the data set", llc.n * 3),
            Need("llc.sgld.num_chains, llc.sgld.num_steps, llc.sgld.thin", "the kept SGLD draws",
                 sg.num_chains * kept * D),
            Need("llc.n, llc.sgld.num_chains", "one forward pass of every chain over the data",
                 sg.num_chains * llc.n * width),
            Need("llc.beta_sweep.chains_per_beta, llc.beta_sweep.num_samples", "the kept draws of the beta sweep",
                 betas * bs.chains_per_beta * bs.num_samples * D)]


def _lambda_curve(s) -> list[Need]:
    from ..kinds.lambda_curve_kind import MAX_GIBBS_PARAMS, MAX_PARAMS, _exact, _readers
    from ..posterior.estimand_curve import STEP_LADDER

    # each case against the bound of the samplers that read it (as resolve, which refuses a case none reads)
    bound = lambda c: MAX_GIBBS_PARAMS if _readers(s, c) == ["gibbs"] else MAX_PARAMS
    D = max([_exact(c, f"cases[{i}]", bound(c))[2] for i, c in enumerate(s.cases) if _readers(s, c)] or [1])
    runs = max(c.runs or s.curve.runs for c in s.cases)                 # a case's runs override [curve]'s
    out = []
    if s.smc is not None:
        out.append(Need("smc.num_particles, curve.runs, cases", "the particles and their moves of every run of the "
                        f"largest case ({D} parameters)", 2 * runs * s.smc.num_particles * D))
    if s.gibbs is not None:                # the chains run one after another; the output holds their means
        out.append(Need("gibbs.chains, cases", f"the Gibbs chains' layers, products and eigenbases of the largest case "
                        f"({D} parameters)", 4 * D + s.gibbs.chains * s.gibbs.temperatures))
    if s.mcmc is not None:
        m = s.mcmc
        out.append(Need("mcmc.temperatures, mcmc.chains, mcmc.num_samples, cases", "the kept NUTS draws of the largest "
                        f"case ({D} parameters)", m.temperatures * m.chains * m.num_samples * D))
    if s.sgld is not None:
        g = s.sgld
        rungs = len(STEP_LADDER)          # the pilots: two chains per rung and t; every step is held until thinned
        out.append(Need("sgld.temperatures, sgld.chains, sgld.num_steps, sgld.pilot_steps, cases", "the SGLD chains' "
                        f"steps of the largest case ({D} parameters), pilots included",
                        g.temperatures * (g.chains * g.num_steps + 2 * rungs * g.pilot_steps) * D))
    return out


def _tms(s) -> list[Need]:
    e = s.estimate
    c = max([*s.table.c, *(g.c for g in e.kgons)])
    D = 3 * c
    return [Need("table.c", f"the Hessian and Fisher matrices of the k-gon table ({D} parameters)", 2 * D * D),
            Need("smc.num_particles, estimate.runs, estimate.c, estimate.kgons", "the particles and their moves of "
                 f"every run of the largest k-gon ({D - 1} local parameters)", 2 * e.runs * s.smc.num_particles * D)]


def _tms_transition(s) -> list[Need]:
    t, D = s.transition, 3 * s.transition.c
    runs = t.datasets * t.runs
    check = s.check.factor * s.smc.num_particles * min(s.check.datasets, t.datasets) * t.runs if s.check.enabled else 0
    return [Need("transition.ns, transition.refine, transition.datasets, transition.runs, smc.num_particles",
                 f"the kept particles of every n ({D} parameters; relabelled after the scan)",
                 (len(t.ns) + t.refine) * runs * s.smc.num_particles * (D + 1)),
            Need("transition.ns, transition.datasets, transition.runs", "the nested data sets, sorted per run",
                 runs * max(t.ns) * t.c * 2),
            Need("check.factor, check.datasets, smc.num_particles", "the check's particles and their moves",
                 2 * check * D)]


def _tms_training(s) -> list[Need]:
    t, q, D = s.training, s.llc, 3 * s.training.c
    K = min(t.checkpoints, t.steps + 1)
    data = 4 * t.c * max(t.ns)                                  # one data set's sorted magnitudes and prefix sums
    kept = len(range(q.num_burnin, q.num_steps, q.thin)) * D
    needs = [Need("training.ns, training.c", "the nested data sets, sorted", len(t.ns) * data),
             Need("training.ns, training.runs, training.checkpoints", f"the parameters at every checkpoint ({D} "
                  "parameters)", len(t.ns) * t.runs * K * D)]
    if q.enabled:
        needs += [Need("llc.num_chains, training.ns", "one checkpoint's SGLD chains' copies of the data",
                       q.num_chains * data),
                  Need("llc.num_chains, llc.num_steps, llc.num_burnin, llc.thin", "one checkpoint's kept SGLD draws",
                       q.num_chains * kept)]
    return needs


def _regions(s) -> list[Need]:
    r = s.regions
    widest = max([r.xor_wide.width, *r.annulus.widths, *r.lines.widths])
    return [Need("regions.resolution", "the activation patterns of the picture's grid",
                 r.resolution ** 2 * widest * max(len(r.annulus.widths), r.lines.hidden_layers)),
            Need("regions.lines.n_in, regions.lines.widths", "one network's weights",
                 max(r.lines.widths) ** 2 * r.lines.hidden_layers + max(r.lines.widths) * r.lines.n_in)]


def _functional_dimension(s) -> list[Need]:
    f = s.functional_dimension
    n0, depth = max(f.n_in), max(f.depths)
    P = depth * (n0 * n0 + n0)                       # parameters of depth layers of width n0
    return [Need("functional_dimension.n_in, functional_dimension.depths, functional_dimension.point_factors",
                 f"one network's Jacobian ({P} parameters at {max(f.point_factors):g} x that many points)",
                 max(f.point_factors) * P * P)]


ESTIMATES: dict[str, Callable[[Any], list[Need]]] = {
    "landscape": _landscape, "fisher": _fisher, "posterior": _posterior, "learning_coefficient": _learning_coefficient,
    "regions": _regions, "functional_dimension": _functional_dimension, "lambda_curve": _lambda_curve,
    "tms": _tms, "tms_transition": _tms_transition, "tms_training": _tms_training,
}


def needs(settings) -> list[Need]:
    """The arrays a kind's run must hold (none for a kind without an estimate: its schema bounds it)."""
    fn = ESTIMATES.get(settings.kind)
    return fn(settings) if fn is not None else []


def check(settings, available: int | None = None) -> None:
    """ConfigError naming the keys of the largest array that cannot fit in ``available`` bytes (default: the
    memory available now, :func:`slt_relu.workflow.provenance.available_memory`)."""
    from .provenance import available_memory

    available = available_memory() if available is None else available
    itemsize = 4 if getattr(settings, "dtype", "float64") == "float32" else 8
    worst = max(needs(settings), key=lambda n: n.elements, default=None)
    if worst is not None and worst.elements * itemsize > available:
        raise ConfigError(f"{worst.keys}: {worst.what} needs ~{human(worst.elements * itemsize)} at least; "
                          f"this machine has {human(available)} available")
