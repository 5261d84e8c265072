"""Memory a run needs, checked before it starts: a config whose arrays cannot fit in the memory this
machine has is refused with one line naming the keys that size them and the estimate, e.g.
``landscape.n: 10^12 points need ~8.0 TB at least; this machine has 23.1 GB available``.

Each kind's estimate is its Kind's ``memory`` function (``slt_relu.workflow.kind``), in the kind's module;
this module holds what they share (:class:`Need`, :func:`params`, the truth's size) and the check.  Each
estimate is a lower bound on the run's peak: the size of one array the kind must hold at once
(a data set, the kept draws of one sweep point, one batch of forward passes, a Fisher matrix), counted
from the settings alone. A run refused here could never have finished; a run that passes may still be
too large for other reasons (XLA's temporaries), which the estimates do not try to predict. One
exception: under SMC's stopping rule a sweep point is counted at the bounds the rule may grow it to
(max_chains_per_dataset runs of max_particles particles), so a run is refused before it could reach
them, though one that met its targets early would have fit.
"""
from __future__ import annotations

from typing import NamedTuple

from .settings import ConfigError
from .kind import kinds

__all__ = ["Need", "check", "human", "needs", "params", "quadrature_points", "truth_size", "width_keys"]


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


def width_keys(s) -> str:
    """', truth.m' where the truth's size comes from the config (m-symmetric truths)."""
    return ", truth.m" if getattr(getattr(s, "truth", None), "m", None) is not None else ""


def truth_size(s) -> tuple[int, int]:
    """(width, n_in) of the model of a config's example ([inputs] n_in where it says one); (1, 1), a lower
    bound, where the example cannot be built (its own one-line error follows when the run resolves it)."""
    from .schemas import example_of

    truth, inputs = getattr(s, "truth", None), getattr(s, "inputs", None)
    width, n_in = 1, 1
    if truth is not None:
        try:
            base = example_of(truth).model.base
            width, n_in = base.width, base.n_in
        except ConfigError:
            pass
    if inputs is not None and inputs.n_in:
        n_in = inputs.n_in
    return width, n_in


def quadrature_points(s) -> int:
    """Points of the 2-D tensor rule of Gaussian inputs ((cells x order)^2), 0 for other inputs."""
    inputs = getattr(s, "inputs", None)
    if inputs is not None and getattr(inputs, "distribution", None) == "gaussian":
        return (inputs.cells * inputs.order) ** 2
    return 0


def needs(settings) -> list[Need]:
    """The arrays a kind's run must hold: its Kind's ``memory`` estimate (none for a kind without one: its
    schema bounds it)."""
    kind = kinds().get(settings.kind)
    return kind.memory(settings) if kind is not None and kind.memory is not None else []


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
