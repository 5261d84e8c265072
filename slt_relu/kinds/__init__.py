"""The shipped experiment kinds: one module per kind, each registering a :class:`~slt_relu.workflow.kind.Kind`
(its schema, resolve, run -> Output, headline, memory estimate; ``slt_relu.workflow.kind``).  Importing the
package registers them; the workflow imports it on first use of its registry
(:func:`slt_relu.workflow.kind.kinds`).  ``KINDS`` maps a config's ``kind`` to its Kind.
"""
# each shipped kind's module registers its Kind when imported
from . import (fisher_kind, functional_dimension_kind, lambda_curve_kind, landscape, llc_kind,  # noqa: F401
               posterior_kind, regions_kind, symmetry_kind, tms_kind)
from . import tms_transition_kind  # noqa: F401,E402
from . import tms_training_kind  # noqa: F401,E402
from . import network_landscape  # noqa: F401,E402
from ..workflow.kind import KINDS, Kind, Output, register_kind

__all__ = ["KINDS", "Kind", "Output", "register_kind"]
