"""Sphinx configuration of the slt_relu documentation site (build: README's docs command)."""
import importlib
import inspect
import sys
from pathlib import Path

from docutils import nodes
from sphinx import addnodes

import slt_relu

sys.path.insert(0, str(Path(__file__).parent / "_ext"))   # the site's own Sphinx extensions

project = "slt_relu"
author = "the slt_relu developers"
release = slt_relu.__version__
extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.autosummary", "sphinx.ext.napoleon", "sphinx.ext.mathjax",
              "sphinx.ext.viewcode", "sphinx.ext.intersphinx"]
extensions.append("experiment_results")   # docs/_ext: the experiment pages read their numbers from results/
extensions.append("local_mathjax")        # docs/_ext: MathJax from the build's _static/, not from a CDN
extensions.append("full_size_images")     # docs/_ext: every image links to its file, to open it at full size
extensions.append("breakable_names")      # docs/_ext: a dotted name or a path in a table cell may break after . and /
extensions.append("api_pages")            # docs/_ext: the API reference's page per module (docs/api/)
extensions.append("collapsed_navigation") # docs/_ext: the sidebar holds the current page's branch, not the whole site
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb", ".rst": "restructuredtext"}   # .rst: the API's module pages
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = "slt_relu"
html_static_path = ["_static"]
html_css_files = ["site.css"]              # docs/_static/site.css: tables, lists and code that fit the column
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autosummary_generate = False          # the module pages are api_pages' (docs/_ext), the tables autosummary's
add_module_names = False              # an entry sits on its module's page, under the module's name
napoleon_google_docstring = True
napoleon_numpy_docstring = False
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath", "amsmath"]

# The tutorials (docs/tutorials/NAME.ipynb, links to notebooks/NAME.ipynb) show the outputs stored in the notebooks:
# the site runs no code; tests/test_notebooks.py checks that the stored outputs are what the code prints now.
nb_execution_mode = "off"
nb_output_stderr = "remove"      # warnings name the writer's paths; the test ignores stderr too

# Every cross-reference must resolve (-W makes a broken one fail the build).  A reference to an slt_relu object
# resolves to the entry that documents it, on the page of its module (slt_relu.NUTSSettings and
# slt_relu.sampling.NUTSSettings are slt_relu.sampling.settings.NUTSSettings), or, for an object the API reference
# does not document (a private one), renders unlinked; a name that slt_relu does not have still fails
# (resolve_slt_relu below).  Types of Python, JAX, NumPy, xarray and Matplotlib link to those projects' pages
# through intersphinx, whose inventories are files of this repository (docs/inventories/make_inventories.py says
# why): the build fetches nothing.  Only the types of packages without an inventory here are ignored.
nitpicky = True
INVENTORIES = Path(__file__).resolve().parent / "inventories"
intersphinx_mapping = {name: (url, str(INVENTORIES / f"{name}.inv")) for name, url in [
    ("python", "https://docs.python.org/3/"), ("jax", "https://docs.jax.dev/en/latest/"),
    ("numpy", "https://numpy.org/doc/stable/"), ("xarray", "https://docs.xarray.dev/en/stable/"),
    ("matplotlib", "https://matplotlib.org/stable/")]}
WITHOUT_INVENTORY = r"(pydantic|annotated_types|optax|numpyro|blackjax|arviz_base|arviz_stats|h5netcdf|h5py|scipy|" \
                    r"tqdm|equinox|flax)"
nitpick_ignore_regex = [(r"py:.*", WITHOUT_INVENTORY + r"(\..+)?")]

# The names Python gives some external types in annotations, and the short names of docstrings, as the names
# their projects document them under (the inventories' names).
EXTERNAL_NAMES = {
    "jax.jaxlib._jax.Array": "jax.Array", "jaxlib._jax.Array": "jax.Array", "jaxlib._jax.ArrayImpl": "jax.Array",
    "jax.jaxlib._jax.ArrayImpl": "jax.Array", "jax._src.mesh.Mesh": "jax.sharding.Mesh",
    "numpy.random._generator.Generator": "numpy.random.Generator", "np.ndarray": "numpy.ndarray",
    "jnp.ndarray": "jax.Array", "Path": "pathlib.Path", "PathLike": "os.PathLike",
    **{name: f"typing.{name}" for name in ("Any", "Annotated", "Callable", "ClassVar", "Literal", "NamedTuple",
                                          "Optional", "Sequence", "Union")},
}


def external_names(app, doctree):
    """doctree-read: references to the names of EXTERNAL_NAMES go to the documented names, shown so where they
    were shown in full; an slt_relu type shown in full in a Type field (napoleon's, of an attribute) shows its last
    part, as in the other fields."""
    for ref in doctree.findall(addnodes.pending_xref):
        if ref.get("refdomain") != "py":
            continue
        target = ref["reftarget"]
        name = EXTERNAL_NAMES.get(target)
        if name is not None:
            ref["reftarget"] = name
        in_type = isinstance(ref.parent.parent, nodes.field_body) and ref.parent.parent.parent[0].astext() == "Type"
        for text in list(ref.findall(nodes.Text)):
            if text.astext() == target and (name or (in_type and target.startswith("slt_relu."))):
                shown = name if name and not target.startswith("slt_relu.") else target.rsplit(".", 1)[-1]
                text.parent.replace(text, nodes.Text(shown))

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
        parts[i] = _escape_stars(re.sub(r"(\w)_(?=\W|$)", r"\1\\_", parts[i].replace("|", r"\|")))
    return "``".join(parts)


STARS = re.compile(r"(?<![\w*\\])\*{1,2}(?=[^\s*])")


def _escape_stars(text: str) -> str:
    """*word* and **words** stay emphasis; a * or ** that no star closes on the line (*args, **options, f(a, *, b))
    is a star."""
    out, start = [], 0
    for opener in STARS.finditer(text):
        stars = opener.group()
        if not re.search(r"[^\s*]" + re.escape(stars) + r"(?![\w*])", text[opener.end():]):
            out += [text[start:opener.start()], "\\" + "\\".join(stars)]
            start = opener.end()
    return "".join(out) + text[start:]


def plain_text_docstring(app, what, name, obj, options, lines):
    out, base, literal, in_sections = [], None, None, False
    attributes, entry_indent = False, None
    for k, line in enumerate(lines):
        if line.strip() and base is None:
            base = _indent(line)
        if SECTION.match(line):
            in_sections = True
            attributes, entry_indent = line.strip() == "Attributes:", None
        elif attributes and line.strip() and entry_indent is None:
            entry_indent = _indent(line)
        if literal is not None and line.strip() and _indent(line) <= literal:
            literal = None
        starts_block = (not in_sections and literal is None and line.strip() and base is not None
                        and _indent(line) > base and k > 0 and not lines[k - 1].strip())
        if starts_block:
            out[-1:] = ["", "::", ""]
            literal = base
        # an Attributes entry's name is napoleon's ``.. attribute::`` argument, which reST does not read: kept as is
        entry = ATTRIBUTE_NAME.match(line) if attributes and _indent(line) == entry_indent else None
        head = entry.group() if entry else ""
        out.append(line if literal is not None else head + _escape(line[len(head):]))
    for k in range(1, len(out)):                 # "Returns: (x, y): ..." names a tuple's parts: not a type
        if out[k - 1].strip() == "Returns:":
            out[k] = RETURNED_TUPLE.sub(r"\1 --", out[k])
    lines[:] = out


ATTRIBUTE_NAME = re.compile(r"^\s*\w+(?=:(\s|$))")
RETURNED_TUPLE = re.compile(r"^(\s*\(\w+(?:, \w+)+\)):(?=\s)")


def _lookup(path: str, scope=None):
    """The object a dotted path names: from ``scope``'s attributes when given, else imported (slt_relu only)."""
    parts = path.split(".")
    if scope is not None:
        obj = scope
    else:
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            parts = parts[i:]
            break
        else:
            return None
    for part in parts:
        obj = getattr(obj, part, _MISSING)
        if obj is _MISSING:
            return None
    return obj


_MISSING = object()


def _is_slt_relu(obj) -> bool:
    if inspect.ismodule(obj):
        return obj.__name__.split(".")[0] == "slt_relu"
    if inspect.isclass(obj) or callable(obj):
        return (getattr(obj, "__module__", None) or "").split(".")[0] == "slt_relu"
    return True                                     # data found in an slt_relu scope (a constant)


def _scopes_of(owner):
    """An object's scopes: a class and its module, a function's module, a module itself."""
    if inspect.ismodule(owner):
        return [owner]
    if inspect.isclass(owner) or inspect.isroutine(owner):
        return ([owner] if inspect.isclass(owner) else []) + [sys.modules.get(owner.__module__)]
    return []


def _enclosing_scopes(node):
    """The classes and modules that define the objects whose API entries (desc, innermost first) hold node."""
    scopes = []
    while node is not None:
        if isinstance(node, addnodes.desc):
            sig = next(node.findall(addnodes.desc_signature), None)
            if sig is not None and sig.get("module", "").startswith("slt_relu") and sig.get("fullname"):
                scopes += _scopes_of(_lookup(sig["module"] + "." + sig["fullname"]))
        node = node.parent
    return scopes


def scope_summaries(app, doctree):
    """doctree-read: a reference in an autosummary row's summary (a docstring's first sentence) is read in the
    scope of the row's object, as in that object's entry (its module, and its class)."""
    from sphinx.ext.autosummary import autosummary_table

    for table in doctree.findall(autosummary_table):
        for row in table.findall(nodes.row):
            named = next(row.children[0].findall(addnodes.pending_xref), None) if row.children else None
            owner = _lookup(named["reftarget"]) if named is not None and named["reftarget"].startswith("slt_relu") \
                else None
            if owner is not None and not (inspect.ismodule(owner) or inspect.isclass(owner) or callable(owner)):
                owner = _lookup(named["reftarget"].rsplit(".", 1)[0])      # a constant: its module
            scopes = _scopes_of(owner) if owner is not None else []
            if not scopes or scopes[-1] is None:
                continue
            context = {"py:module": scopes[-1].__name__}
            if inspect.isclass(scopes[0]):
                context["py:class"] = scopes[0].__qualname__
            for cell in row.children[1:]:
                for ref in cell.findall(addnodes.pending_xref):
                    if ref.get("refdomain") == "py":
                        ref.update_all_atts(context, replace=True)


def resolve_slt_relu(app, env, node, contnode):
    """missing-reference: an slt_relu name, full (slt_relu.a.B) or short in the scope of the docstring it is in
    (PhaseMasses in slt_relu.posterior.masses.phase_masses), links to the API entry of the same object, or renders
    unlinked when the reference does not document that object; an unknown name is left to warn."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    obj = None
    if target.split(".")[0] == "slt_relu":
        obj = _lookup(target)
    else:
        scopes = []                                 # the reST context (py:module, py:class), then the definitions
        context = ".".join(filter(None, [node.get("py:module"), node.get("py:class")]))
        if context.startswith("slt_relu"):
            scopes += [_lookup(context), _lookup(node["py:module"])]
        for scope in filter(None, scopes + _enclosing_scopes(node)):
            obj = _lookup(target, scope)
            if obj is not None:
                break
    if obj is None or not _is_slt_relu(obj):
        return None
    if not hasattr(app, "_slt_relu_entries"):      # documented slt_relu classes and functions by identity
        app._slt_relu_entries = {}
        for name in env.get_domain("py").objects:
            entry = _lookup(name) if name.startswith("slt_relu.") else None
            if inspect.isclass(entry) or inspect.isroutine(entry):
                app._slt_relu_entries.setdefault(id(entry), name)
    name = app._slt_relu_entries.get(id(obj)) if inspect.isclass(obj) or inspect.isroutine(obj) else None
    if name is None:
        return contnode
    return env.get_domain("py").resolve_xref(env, node["refdoc"], app.builder, "obj", name, node, contnode)


# A NamedTuple's or dataclass's fields are documented once, by its docstring's Attributes section: neither as
# the parameters of its signature (autodoc_typehints = "description" lists them with their types) nor as members
# (a NamedTuple field is a descriptor whose docstring is "Alias for field number k").  A pydantic model (a config
# table of the workflow) shows no signature: its synthesized one holds every field's validation metadata.
def _attribute_names(obj) -> set[str]:
    doc, names, inside = inspect.getdoc(obj) or "", set(), False
    for line in doc.splitlines():
        if line.strip() == "Attributes:":
            inside = True
        elif inside and line.strip() and not line.startswith(" "):
            inside = False
        elif inside and (entry := re.match(r" {4}(\w+)( \(.*?\))?:", line)):
            names.add(entry.group(1))
    return names


def _is_pydantic_model(obj) -> bool:
    return inspect.isclass(obj) and any(c.__module__.startswith("pydantic") and c.__name__ == "BaseModel"
                                        for c in obj.__mro__)


def fields_once(app, what, name, obj, options, signature, return_annotation):
    if what not in ("class", "exception"):
        return None
    annotations = app.env.current_document.autodoc_annotations.get(name, {})
    if _is_pydantic_model(obj):
        annotations.clear()
        return "", None
    for field in _attribute_names(obj):
        annotations.pop(field, None)
    return None


def skip_tuple_fields(app, what, name, obj, skip, options):
    return True if type(obj).__name__ == "_tuplegetter" or name == "model_config" else None   # (pydantic's)


def setup(app):
    app.connect("autodoc-process-docstring", plain_text_docstring, priority=400)
    app.connect("autodoc-process-signature", fields_once, priority=600)   # after autodoc records the annotations
    app.connect("autodoc-skip-member", skip_tuple_fields)
    app.connect("doctree-read", scope_summaries)
    app.connect("doctree-read", external_names)
    app.connect("missing-reference", resolve_slt_relu)
