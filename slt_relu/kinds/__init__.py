"""Experiment kinds: each module has ``validate(root) -> settings``, ``describe(settings)``
and ``run(settings, outdir, key, progress) -> metrics``."""
from . import fisher_kind, functional_dimension_kind, landscape, llc_kind, posterior_kind, regions_kind, symmetry_kind

KINDS = {"landscape": landscape, "fisher": fisher_kind, "symmetry": symmetry_kind, "regions": regions_kind,
         "functional_dimension": functional_dimension_kind, "posterior": posterior_kind,
         "learning_coefficient": llc_kind}
