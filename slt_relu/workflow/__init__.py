"""The experiment layer: a TOML config becomes typed settings, runs as its kind (``slt_relu.kinds``) and
lands in a results folder.  It imports the library and is never imported by it; it loads the shipped kinds
on first use of the registry (``kind.kinds``), never by name.

    kind         the Kind protocol (schema, resolve, run -> Output, headline, memory) and its registry
    settings     schemas of config tables (pydantic): one-line errors naming the key, the settings tables,
                 the schema of a library settings type (``section_of``)
    schemas      the schema pieces kinds share: the top-level keys, [truth], [inputs], the samplers' tables
    config       reading a TOML file, ``--set`` overrides
    runner       validate, resolve and run a config into a results folder atomically, never destroying data
    sweep        a config's [sweep] as points; per-point netCDF checkpoints; programs of points; resume
    report       what a results folder says: the headline numbers, ``slt-relu show``
    compare      a results folder against a reference, each number with its tolerance
    memory       configs whose arrays cannot fit, refused before anything is built
    provenance   versions, machine, git commit for the manifest
    cli          the ``slt-relu`` command

Several processes (``slt_relu.distributed``) and the netCDF files (``slt_relu.netcdf``) sit in the library,
which uses them too; the library's own settings are plain frozen types (``slt_relu.sampling.settings``,
``slt_relu.posterior.llc.LLCSettings``) that the config's schemas build.
"""

__all__ = []   # a namespace of modules: their names are imported from them
