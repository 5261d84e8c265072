"""Experiment kinds: one module per kind, each registering a :class:`~slt_relu.kinds.kind.Kind` (its
schema, resolve, run -> Output, headline; ``slt_relu.kinds.kind``).  Importing the package registers the shipped
ones; ``KINDS`` maps a config's ``kind`` to its Kind.
"""
from ..settings import settings_table
# each shipped kind's module registers its Kind when imported
from . import fisher_kind, functional_dimension_kind, landscape, llc_kind, posterior_kind, regions_kind, symmetry_kind  # noqa: F401
from .kind import KINDS, Kind, Output, register_kind

__all__ = ["KINDS", "Kind", "Output", "register_kind", "settings_markdown"]


def settings_markdown(kinds) -> str:
    """The site's settings page (docs/settings.md): one table per kind, generated from the schemas."""
    return "\n\n".join(f"## `kind = \"{k}\"`\n\n{KINDS[k].description}\n\n{settings_table(KINDS[k].settings)}"
                       for k in kinds)
