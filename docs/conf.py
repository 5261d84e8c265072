"""Sphinx configuration of the slt_relu documentation site (build: README's docs command)."""
import slt_relu

project = "slt_relu"
author = "the slt_relu developers"
release = slt_relu.__version__
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = "slt_relu"
autodoc_typehints = "description"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
myst_heading_anchors = 3

# Docstrings are written as plain text that reads well in help(): a formula sits in an indented block,
# |x| is a norm, psi_ a subscript.  Before napoleon reads them, the summary's indented blocks become
# literal blocks and, elsewhere, | and a word's trailing _ are escaped, so reST takes none of them
# for markup (substitutions, references).
import re

SECTION = re.compile(r"^\s*(Args|Arguments|Attributes|Returns|Yields|Raises|References|Examples?|Notes?|"
                     r"See Also|Warnings?):\s*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _escape(line: str) -> str:
    parts = line.split("``")                    # leave inline literals alone
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"(\w)_(?=\W|$)", r"\1\\_", parts[i].replace("|", r"\|"))
    return "``".join(parts)


def plain_text_docstring(app, what, name, obj, options, lines):
    out, base, literal, in_sections = [], None, None, False
    for k, line in enumerate(lines):
        if line.strip() and base is None:
            base = _indent(line)
        if SECTION.match(line):
            in_sections = True
        if literal is not None and line.strip() and _indent(line) <= literal:
            literal = None
        starts_block = (not in_sections and literal is None and line.strip() and base is not None
                        and _indent(line) > base and k > 0 and not lines[k - 1].strip())
        if starts_block:
            out[-1:] = ["", "::", ""]
            literal = base
        out.append(line if literal is not None else _escape(line))
    lines[:] = out


def setup(app):
    app.connect("autodoc-process-docstring", plain_text_docstring, priority=400)
