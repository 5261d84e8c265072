"""Sphinx extension of the site: the API reference's module pages, written from the package when a build starts.

A module is public when no part of its name starts with ``_``; its public names are its ``__all__`` (every public
module has one: tests/test_docs.py).  docs/api/index.md is the hand-written landing page (the curated ``slt_relu``
namespace, grouped); every other public module gets a page ``docs/api/MODULE.rst``: its docstring, a table of its
submodules (a package) and one of its public names, then an entry per name it is the *home* of.

Every object is documented once, at its home: the module that defines it when that module lists it in its
``__all__``, else the shallowest public module that lists it (``slt_relu.sampling.setting``, defined in the private
``_validate``); a constant is at home in the module that assigns and documents it.  Elsewhere the name is a row of
its module's table linking to that entry (``slt_relu.sample`` and ``slt_relu.sampling.sample`` are
``slt_relu.sampling.base.sample``), and the entry says under which other names it is importable.

The pages are build output (.gitignore): a module or a name added to the package gets its page or entry without
an edit here, and a page whose module is gone is removed.  The landing page lists the top-level modules in its
toctrees by hand, so a new top-level module is a build warning (a page in no toctree) until it is placed.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import reprlib
from pathlib import Path

from sphinx.pycode import ModuleAnalyzer

PACKAGE = "slt_relu"
FOLDER = "api"                      # docs/api/: index.md (committed) and the module pages (generated)


def public_modules() -> list[str]:
    """Every public module of the package but the package itself (the landing page), in import-path order."""
    package = importlib.import_module(PACKAGE)
    names = [m.name for m in pkgutil.walk_packages(package.__path__, PACKAGE + ".")]
    return sorted(n for n in names if not any(part.startswith("_") for part in n.split(".")))


def public_names(module: str) -> list[str]:
    return list(getattr(importlib.import_module(module), "__all__", []))


def _lists(module: str, name: str, obj) -> bool:
    return name in public_names(module) and getattr(importlib.import_module(module), name, None) is obj


def home(module: str, name: str, modules: list[str]) -> str:
    """The full name of the entry documenting ``module.name`` (a module's home is its page: its own name)."""
    obj = getattr(importlib.import_module(module), name)
    if inspect.ismodule(obj):
        return obj.__name__
    if inspect.isclass(obj) or callable(obj):
        defining, own = getattr(obj, "__module__", None), getattr(obj, "__name__", name)
        if defining in modules and _lists(defining, own, obj):
            return f"{defining}.{own}"
        for candidate in sorted(modules, key=lambda m: (m.count("."), m)):   # defined privately: the shallowest
            if _lists(candidate, name, obj):                                   # public module that lists it
                return f"{candidate}.{name}"
        return f"{module}.{name}"
    defining = [m for m in modules if name in _constants(m) and _lists(m, name, obj)]   # a constant: where it
    return f"{defining[0]}.{name}" if defining else f"{module}.{name}"                 # is assigned, documented


def _analyzer(module: str) -> ModuleAnalyzer | None:
    try:
        analyzer = ModuleAnalyzer.for_module(module)
        analyzer.analyze()
        return analyzer
    except Exception:                           # no source (never for this package)
        return None


def _definitions(module: str) -> dict[str, int]:
    """The top-level names of a module's source (imports, def, class, assignment), each with its order."""
    analyzer = _analyzer(module)
    return analyzer.tagorder if analyzer else {}


def _constants(module: str) -> set[str]:
    """The module's top-level assignments that have a docstring (or a #: comment)."""
    analyzer = _analyzer(module)
    return {name for scope, name in analyzer.attr_docs if scope == ""} if analyzer else set()


def _source_order(module: str, names: list[str]) -> list[str]:
    order = _definitions(module)
    return sorted(names, key=lambda n: (order.get(n, len(order)), names.index(n)))


def _entry(full: str, obj) -> list[str]:
    if inspect.isclass(obj):
        lines = [f".. auto{'exception' if issubclass(obj, BaseException) else 'class'}:: {full}", "   :members:"]
        call = vars(obj).get("__call__")
        if call is not None and (call.__doc__ or "").strip():
            lines.append("   :special-members: __call__")
        return lines
    if callable(obj):
        return [f".. autofunction:: {full}"]
    lines = [f".. autodata:: {full}"]
    if len(reprlib.repr(obj)) > 60 or "..." in reprlib.repr(obj):
        lines.append("   :no-value:")                  # a long value says less than the docstring
    return lines


def _relative(full: str, module: str) -> str:
    """An autosummary row for ``full`` on ``module``'s page: relative to it (autosummary warns about a name that
    repeats the page's module), shown by its last part."""
    return "~" + full.removeprefix(module + ".")


def _title(text: str, rule: str = "=") -> list[str]:
    return [text, rule * len(text), ""]


def module_page(module: str, modules: list[str], homes: dict[tuple[str, str], str]) -> str:
    """The reST of ``module``'s page: its docstring, its submodules' and public names' tables, its entries."""
    mod = importlib.import_module(module)
    submodules = [m for m in modules if m.rsplit(".", 1)[0] == module]
    names = [n for n in public_names(module) if not inspect.ismodule(getattr(mod, n))]
    own = _source_order(module, [n for n in names if homes[module, n] == f"{module}.{n}"])
    rows = own + [n for n in names if n not in own]
    lines = _title(module) + [f".. automodule:: {module}", ""]
    if submodules:
        lines += [".. rubric:: Modules", "", ".. autosummary::", ""]
        lines += [f"   {_relative(m, module)}" for m in submodules] + ["", ".. toctree::", "   :hidden:", ""]
        lines += [f"   {m.rsplit('.', 1)[1]} <{m}>" for m in submodules] + [""]   # in the sidebar, under module
    if rows:
        lines += [".. rubric:: Names", "", ".. autosummary::", "   :nosignatures:", ""]
        lines += [f"   {_relative(homes[module, n], module)}" for n in rows] + [""]
    for name in own:
        lines += _entry(f"{module}.{name}", getattr(mod, name)) + [""]
    return "\n".join(lines)


def reference() -> tuple[list[str], dict[tuple[str, str], str]]:
    """The public modules and the home of each of their public names (and of the package's)."""
    modules = public_modules()
    homes = {(m, n): home(m, n, modules) for m in [PACKAGE] + modules for n in public_names(m)}
    return modules, homes


def write_pages(app) -> None:
    """builder-inited: write the module pages (those that changed) and remove the pages of modules gone."""
    folder = Path(app.srcdir) / FOLDER
    if not (folder / "index.md").is_file():          # another site built with this conf.py (a test's)
        return
    modules, homes = reference()
    aliases: dict[str, list[str]] = {}
    for (module, name), full in homes.items():
        if f"{module}.{name}" != full:
            aliases.setdefault(full, []).append(f"{module}.{name}")
    app.slt_relu_aliases = {k: sorted(v, key=lambda a: (a.count("."), a)) for k, v in aliases.items()}
    pages = {folder / f"{m}.rst": module_page(m, modules, homes) for m in modules}
    for stale in set(folder.glob(f"{PACKAGE}.*.rst")) - set(pages):
        stale.unlink()
    for path, text in pages.items():
        if not path.is_file() or path.read_text() != text:   # unchanged pages keep their time: no rebuild
            path.write_text(text)


def also_importable(app, what, name, obj, options, lines) -> None:
    """After an entry's summary line: the other public names of its object (``slt_relu.sample`` ...)."""
    aliases = getattr(app, "slt_relu_aliases", {}).get(name)
    if not aliases:
        return
    end = next((k for k, line in enumerate(lines) if not line.strip()), len(lines))
    lines[end:end] = ["", "Also importable as " + ", ".join(f"``{a}``" for a in aliases) + "."]


def setup(app):
    app.connect("builder-inited", write_pages)
    app.connect("autodoc-process-docstring", also_importable, priority=600)   # after the site's plain-text pass
    return {"parallel_read_safe": True, "parallel_write_safe": True}
