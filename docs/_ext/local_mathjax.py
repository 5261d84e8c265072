"""Sphinx extension of the site: MathJax served from the build itself, so every formula renders with no network
(README's local build, opened from disk, and docs/check_site.py, whose browser reaches no other host).

The script is MathJax 3.2's single-file component tex-svg-full.js, from the PyPI package sphinx-mathjax-offline
(a dev extra): the TeX input with all its extensions (amsmath among them) and the SVG output with its font are
in that one file, so a page fetches nothing else.  It is copied to _static/mathjax/ and mathjax_path points
there.  The package's own Sphinx extension is not used: it copies all of its files (24 MB, every component,
font and speech table) into every build, and picks the CHTML output, which loads web fonts.
"""
from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path

from sphinx.errors import ExtensionError

DISTRIBUTION = "sphinx-mathjax-offline"
SCRIPT = "tex-svg-full.js"
TARGET = "mathjax"                                  # the folder in the build's _static/


def script() -> Path:
    """The installed tex-svg-full.js; ExtensionError naming the install command when it is missing."""
    try:
        path = Path(importlib.metadata.distribution(DISTRIBUTION).locate_file(
            f"{DISTRIBUTION}/static/mathjax/{SCRIPT}"))
    except importlib.metadata.PackageNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise ExtensionError(f"local_mathjax: MathJax's {SCRIPT} is not installed (it comes with the "
                             f'{DISTRIBUTION} package of the dev extras: pip install -e ".[dev]")')
    return path


def configure(app, config) -> None:
    script()                                        # fail at the start of a build, not after writing every page
    config.mathjax_path = f"{TARGET}/{SCRIPT}"      # relative: Sphinx serves it from _static/
    # Set (so that myst-parser adds its processHtmlClass here, not to mathjax4_config).  Without the noundefined
    # package an unknown macro is a TeX error (an merror with data-mjx-error, which docs/check_site.py reports),
    # not its name quietly drawn in red.
    mathjax = dict(config.mathjax3_config or {})
    mathjax.setdefault("tex", {}).setdefault("packages", {"[-]": ["noundefined"]})
    mathjax.setdefault("svg", {}).setdefault("fontCache", "global")
    config.mathjax3_config = mathjax


def copy_script(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        folder = Path(app.outdir) / "_static" / TARGET
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(script(), folder / SCRIPT)


def setup(app):
    app.setup_extension("sphinx.ext.mathjax")
    app.connect("config-inited", configure)
    app.connect("build-finished", copy_script)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
