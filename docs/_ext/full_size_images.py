"""Sphinx extension of the site: every image of a page links to its file, so a figure that the theme shrinks to
the text column (a results/ figure, a notebook's plot) opens at full size with a click.

Sphinx links an image to its file only when the image is given a width, height or scale; this does it for every
local image that is not already a link (or marked ``no-scaled-link``), with the address the HTML builder gives
the copied file (_images/NAME, relative to the page).
"""
from __future__ import annotations

import posixpath
from urllib.parse import quote

from docutils import nodes
from sphinx.util.osutil import relative_uri


def _candidate(builder, image: nodes.image) -> str | None:
    """The source path the builder will copy for this image (its choice among the candidates), None for a
    remote or data image."""
    candidates = image.get("candidates", {})
    if "?" in candidates:
        return None
    if "*" in candidates:
        return image["uri"]
    return next((candidates[kind] for kind in builder.supported_image_types if kind in candidates), None)


def link_images(app, doctree, docname: str) -> None:
    if app.builder.format != "html":
        return
    folder = relative_uri(app.builder.get_target_uri(docname), app.builder.imagedir)
    for image in list(doctree.findall(nodes.image)):
        if isinstance(image.parent, nodes.reference) or "no-scaled-link" in image["classes"]:
            continue
        source = _candidate(app.builder, image)
        if source is None or source not in app.env.images:
            continue
        reference = nodes.reference("", "", internal=True,
                                    refuri=posixpath.join(folder, quote(app.env.images[source][1])))
        image.replace_self(reference)
        reference.append(image)


def setup(app):
    app.connect("doctree-resolved", link_images)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
