"""Sphinx extension of the site: a dotted name or a path in a table cell (a settings key such as
``cases[].beta_sweep.target_accept_prob``, a function named in its description, docs/experiments/NAME.md) may break
after each of its dots and slashes, so a table of long names fits the text column instead of scrolling sideways.
The break is an HTML <wbr>: the name reads and copies as it is.
"""
from __future__ import annotations

import re

from docutils import nodes

# after the dot of a.b and a[].b (not in 0.25, nor a sentence's full stop) and the slash of a/b
BREAK = re.compile(r"(?<=[\w\]]\.)(?=[A-Za-z_])|(?<=\w/)(?=\w)")


def breakable(text: str) -> list[nodes.Node] | None:
    """The text as Text nodes with a <wbr> at each break, None when it has none."""
    parts = BREAK.split(text)
    if len(parts) < 2:
        return None
    out = [nodes.Text(parts[0])]
    for part in parts[1:]:
        out += [nodes.raw("", "<wbr>", format="html"), nodes.Text(part)]
    return out


VERBATIM = (nodes.math, nodes.math_block, nodes.raw, nodes.FixedTextElement)


def _ancestors(node: nodes.Node, stop: nodes.Node):
    while node is not None and node is not stop:
        node = node.parent
        yield node


def break_names(app, doctree, docname: str) -> None:
    if app.builder.format != "html":
        return
    for cell in doctree.findall(nodes.entry):
        for text in list(cell.findall(nodes.Text)):
            if any(isinstance(node, VERBATIM) for node in _ancestors(text, cell)):
                continue                            # TeX (k/2) and raw markup take no <wbr>
            pieces = breakable(str(text))
            if pieces is not None:
                text.parent.replace(text, pieces)


def setup(app):
    app.connect("doctree-resolved", break_names)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
