"""Experiment kinds: one module per kind, each registering a :class:`~slt_relu.kinds.kind.Kind` (its
schema, resolve, run -> Output, headline; ``slt_relu.kinds.kind``).  Importing the package registers the shipped
ones; ``KINDS`` maps a config's ``kind`` to its Kind.
"""
# each shipped kind's module registers its Kind when imported
from . import (fisher_kind, functional_dimension_kind, lambda_curve_kind, landscape, llc_kind,  # noqa: F401
               posterior_kind, regions_kind, symmetry_kind, tms_kind)
from . import tms_transition_kind  # noqa: F401,E402
from . import tms_training_kind  # noqa: F401,E402
from .kind import KINDS, Kind, Output, register_kind

__all__ = ["KINDS", "Kind", "Output", "register_kind"]

