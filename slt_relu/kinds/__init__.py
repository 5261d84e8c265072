"""Experiment kinds.  Each module declares

* ``Settings``: its config schema (a pydantic model, ``slt_relu.settings``): the only place
  its keys, defaults, bounds and meanings are written;
* ``resolve(settings, raw) -> resolved``: the library objects the run needs (truths, models,
  priors, samplers, sweep points), raising ConfigError for what the schema cannot check;
* ``run(resolved, outdir, key, ctx) -> metrics``: the computation, writing plots and arrays
  into ``outdir`` (``ctx``: checkpoint folder and progress, ``slt_relu.runner.RunContext``).
"""
from . import fisher_kind, functional_dimension_kind, landscape, llc_kind, posterior_kind, regions_kind, symmetry_kind
from ..settings import settings_table

MODULES = (landscape, fisher_kind, symmetry_kind, regions_kind, functional_dimension_kind, posterior_kind, llc_kind)
KINDS = {m.Settings.model_fields["kind"].annotation.__args__[0]: m for m in MODULES}


def settings_markdown(kinds) -> str:
    """README's settings section: one table per kind, generated from the schemas."""
    parts = []
    for kind in kinds:
        module = KINDS[kind]
        doc = (module.__doc__ or "").strip().splitlines()[0]
        parts.append(f"#### `kind = \"{kind}\"`\n\n{doc}\n\n{settings_table(module.Settings)}")
    return "\n\n".join(parts)
