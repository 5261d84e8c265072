"""The experiment-kind protocol and its registry.

A kind is what a config's ``kind = "..."`` names: a schema and three functions,

    settings: a pydantic model (``slt_relu.workflow.settings``; its ``kind`` field is ``Literal[name]``), the
        only place the kind's keys, defaults, bounds and meanings are written;
    resolve(settings, raw) -> resolved: the library objects the run needs (truths, models, priors,
        samplers, sweep points), raising ``ConfigError`` for what the schema cannot check;
    run(resolved, key, ctx) -> Output: the computation (``key``: the config's seed as a PRNG key; ``ctx``:
        checkpoint folder, progress, this process's place among the run's processes,
        ``slt_relu.workflow.runner.RunContext``).  A kind writes no file: the runner writes what it returns;
    headline(metrics) -> lines: the numbers printed at the end of a run and by ``slt-relu show``;
    figures(resolved, results) -> {name: Figure}: every figure of the run, drawn from the resolved settings and
        the results as read back from ``results.nc`` (a Dataset, or a DataTree where the kind wrote one), so
        that the figures show exactly the saved numbers and ``slt-relu plot`` redraws them from a results
        folder; None: no figures.  A kind's ``run`` draws nothing;
    memory(settings) -> [Need]: the arrays the run must hold, from the settings alone
        (``slt_relu.workflow.memory``), or None: no estimate (the schema bounds the run).

``sweeps``: the run is a sweep whose points the processes of a multi-process run share
(``slt_relu.distributed``): every process calls ``run``; all but the first return None once their
share of the points is checkpointed.

A kind module ends with ``KIND = register_kind(Kind(...))``.  The shipped kinds are the modules of
``slt_relu.kinds``, which the workflow never imports by name: :func:`kinds` loads that package on first
use, as a plugin, so the experiment layer's infrastructure does not depend on its kinds.  A kind written
elsewhere registers the same way (``tests/test_kind.py``).
"""
from __future__ import annotations

import importlib
from typing import Callable, NamedTuple

__all__ = ["KINDS", "Kind", "Output", "first_line", "kinds", "register_kind"]

SHIPPED = "slt_relu.kinds"   # the package whose modules register the shipped kinds when imported


class Output(NamedTuple):
    """What a kind's run returns; the runner writes each part into the results folder.

    Attributes:
        metrics: ``metrics.json``: the numbers a reader and the reference tests look at, JSON-able
            (numpy values allowed; NaN becomes null).
        results: ``results.nc``: the experiment's numbers as one labelled xarray Dataset (or DataTree),
            or None.
        draws: {name: xarray DataTree of ArviZ groups}, each written as ``draws/NAME.nc``.
    """

    metrics: dict
    results: object = None
    draws: dict = {}


class Kind(NamedTuple):
    """An experiment kind (module docstring).  description: one line for the settings tables."""

    name: str
    settings: type
    resolve: Callable
    run: Callable
    headline: Callable
    description: str = ""
    sweeps: bool = False
    memory: Callable | None = None
    figures: Callable | None = None


KINDS: dict[str, Kind] = {}
"""The registry ``{name: Kind}``, every kind registered so far (:func:`kinds` loads the shipped ones first)."""


def kinds() -> dict[str, Kind]:
    """The registry {name: Kind}, the shipped kinds loaded (on first use) with every kind registered since."""
    importlib.import_module(SHIPPED)
    return KINDS


def first_line(doc: str | None) -> str:
    """A docstring's first line ("" without one, e.g. under ``python -OO``): a kind's description."""
    return (doc or "").strip().split("\n")[0]


def register_kind(kind: Kind) -> Kind:
    """Make ``kind`` runnable from a config's ``kind = "<kind.name>"``; returns it.  Its settings'
    ``kind`` field must be ``Literal[kind.name]`` (so the schema and the registry name agree)."""
    field = kind.settings.model_fields.get("kind")
    if field is None or getattr(field.annotation, "__args__", None) != (kind.name,):
        raise ValueError(f"kind.settings: expected a schema whose `kind` field is Literal[{kind.name!r}], got "
                         f"{kind.settings.__name__}")
    KINDS[kind.name] = kind
    return kind
