"""Sphinx extension of the site: the sidebar's navigation tree holds the top-level sections and the current page's
own branch (Sphinx's ``toctree(collapse=True)``), not every page of the site.

Furo renders the whole tree into every page (``collapse=False``): for this site's ~290 pages (the API reference's
module pages and their highlighted sources among them) that was 46 % of a build (78 of 169 s, cProfile of
``furo._compute_navigation_tree``: Sphinx copies and resolves the global toctree, then BeautifulSoup parses it, once
per page), quadratic in the pages.  Collapsed, each page resolves only its own branch; the other sections are one
click away, as in Sphinx's own themes.  The hook runs before Furo's (priority 400 < its 500) and wraps the
``toctree`` function Furo calls.
"""
from __future__ import annotations


def _collapsed(app, pagename, templatename, context, doctree) -> None:
    toctree = context.get("toctree")
    if toctree is not None:
        context["toctree"] = lambda **kwargs: toctree(**{**kwargs, "collapse": True})


def setup(app):
    app.connect("html-page-context", _collapsed, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
