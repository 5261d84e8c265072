"""Experiment kinds: each module has ``validate(root) -> settings``, ``describe(settings)``
and ``run(settings, outdir, key, progress) -> metrics``."""
from . import fisher_kind, landscape, symmetry_kind

KINDS = {"landscape": landscape, "fisher": fisher_kind, "symmetry": symmetry_kind}
