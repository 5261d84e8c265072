"""The documentation site (docs/) builds with warnings as errors, every cross-reference resolves (nitpicky), its
API reference has an entry for every public name of the package (a page per module), and its Tutorials are the
notebooks."""
import fcntl
import importlib
import inspect
import json
import os
import pkgutil
import re
import subprocess
import sys
import zlib
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

import slt_relu

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def sphinx(src, out, *options):
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "-E", "-q", "--no-color", "-b", "html", *options, str(src), str(out)],
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """README's docs command, built once per test run for the tests that read the site (the xdist workers of a run
    share it: the first to ask builds it, under a lock): (the run's return code and stderr, the html folder)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent                      # the run's folder, above each worker's own
    out, done = shared / "site" / "html", shared / "site.json"
    with open(shared / "site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            run = sphinx(ROOT / "docs", out)
            done.write_text(json.dumps({"returncode": run.returncode, "stderr": run.stderr}))
    return SimpleNamespace(**json.loads(done.read_text())), out


def public_modules() -> list[str]:
    """The package and every module of it no part of whose name starts with an underscore."""
    found = [m.name for m in pkgutil.walk_packages(slt_relu.__path__, "slt_relu.")]
    return ["slt_relu"] + sorted(n for n in found if not any(part.startswith("_") for part in n.split(".")))


def public_names() -> list[tuple[str, str]]:
    """(module, name) for every name of every public module's __all__: what the package says is public."""
    return [(m, n) for m in public_modules() for n in importlib.import_module(m).__all__]


def entry_ids(module: str, name: str) -> set[str]:
    """The ids an entry for ``module.name`` may have in the built site: a module's page, or the object documented
    under the module that defines it or under a public module that lists it (each object is documented once)."""
    obj = getattr(importlib.import_module(module), name)
    if inspect.ismodule(obj):
        return {f"module-{obj.__name__}"}
    listing = {f"{m}.{name}" for m in public_modules()
               if name in importlib.import_module(m).__all__ and getattr(importlib.import_module(m), name) is obj}
    defined = {f"{obj.__module__}.{obj.__qualname__}"} if hasattr(obj, "__module__") and hasattr(obj, "__qualname__") \
        else set()
    return listing | defined


def test_every_public_module_says_its_public_names():
    """Public is what a module's __all__ says (tests below check each name has an entry): every public module has
    one, and every name in it exists."""
    modules = public_modules()
    assert len(modules) > 100
    assert [m for m in modules if "__all__" not in vars(importlib.import_module(m))] == []
    assert [(m, n) for m, n in public_names() if not hasattr(importlib.import_module(m), n)] == []


def test_the_api_landing_page_is_the_curated_namespace_grouped_as_the_package():
    """docs/api/index.md: a section per group of slt_relu/__init__.py's __all__ (its comments), each an autosummary
    table of that group's names in that order, and nothing outside __all__."""
    source = (ROOT / "slt_relu" / "__init__.py").read_text()
    block = source[source.index("__all__ = ["):source.index("\n]\n", source.index("__all__ = ["))]
    groups, comment = [], False
    for line in block.splitlines()[1:]:
        if line.strip().startswith("#"):
            if not comment:
                groups.append([])
            comment = True
        else:
            groups[-1] += re.findall(r'"(\w+)"', line)
            comment = False
    page = (ROOT / "docs" / "api" / "index.md").read_text()
    tables = [re.findall(r"^   (\w+)$", table, re.M)
              for table in re.findall(r"\.\. autosummary::\n   :nosignatures:\n\n((?:   \w+\n)+)", page)]
    assert tables == groups
    assert sum(groups, []) == slt_relu.__all__


def test_the_site_builds_without_a_warning(site):
    """README's docs command: a broken reference, a docstring reST cannot read or a page outside the table of
    contents fails it (-W)."""
    run, html = site
    assert run.returncode == 0, run.stderr[-3000:]
    for path in NOTEBOOKS:                                         # a tutorial page per notebook, with its figures
        images = sum("image/png" in o.get("data", {}) for c in nbformat.read(path, as_version=4).cells
                     for o in c.get("outputs", []))
        tutorial = (html / "tutorials" / f"{path.stem}.html").read_text()
        assert tutorial.count("<img ") == images > 0, path.name


def test_every_public_name_has_an_entry_in_the_api_reference(site):
    """Every name of every public module's __all__ has an entry in the API reference (an object once, on the page
    of its module), and its module's page (the landing page for slt_relu's) links to that entry."""
    run, html = site
    assert run.returncode == 0, run.stderr[-3000:]
    pages = {p.stem: p.read_text() for p in (html / "api").glob("*.html")}
    ids = {i for text in pages.values() for i in re.findall(r'id="([^"]+)"', text)}
    missing = [f"{m}.{n}" for m, n in public_names() if not entry_ids(m, n) & ids]
    assert missing == [], f"public names without an entry: {missing}"
    unlinked = [f"{m}.{n}" for m, n in public_names()
                if not any(f'#{i}"' in pages["index" if m == "slt_relu" else m] for i in entry_ids(m, n))]
    assert unlinked == [], f"public names their module's page does not link to their entry: {unlinked}"
    assert len(public_names()) > 700


def test_api_entries_show_their_source_and_link_external_types(site):
    """viewcode's [source] link beside an entry; jax.Array (annotated as jax.Array, which Python names
    jax.jaxlib._jax.Array) links to JAX's page through the committed inventory; a NamedTuple's fields are listed
    once (its Attributes section), not again as the parameters of its signature."""
    run, html = site
    assert run.returncode == 0, run.stderr[-3000:]
    page = (html / "api" / "slt_relu.posterior.sample.html").read_text()
    entry = page[page.index('id="slt_relu.posterior.sample.sample_posterior"'):]
    assert '<span class="viewcode-link">' in entry[:entry.index("</dt>")]
    page = (html / "api" / "slt_relu.network.html").read_text()
    two_layer = page[page.index('id="slt_relu.network.TwoLayer"'):page.index('id="slt_relu.network.make_params"')]
    assert "https://docs.jax.dev/en/latest/_autosummary/jax.Array.html" in two_layer
    assert "jaxlib" not in two_layer
    assert two_layer.count('id="slt_relu.network.TwoLayer.w"') == 1
    assert 'Parameters<span class="colon">' not in two_layer


def test_the_inventories_are_the_scripts():
    """docs/inventories/NAME.inv are what docs/inventories/make_inventories.py writes (its table of names changed:
    rerun it)."""
    sys.path.insert(0, str(ROOT / "docs" / "inventories"))
    try:
        import make_inventories
    finally:
        sys.path.pop(0)
    for project, (_, version, objects) in make_inventories.OBJECTS.items():
        committed = (ROOT / "docs" / "inventories" / f"{project}.inv").read_bytes()
        written = make_inventories.inventory(project, version, objects)
        header = written.index(b"zlib.\n") + len(b"zlib.\n")
        assert committed[:header] == written[:header], project
        assert zlib.decompress(committed[header:]) == zlib.decompress(written[header:]), project


def test_every_notebook_is_a_tutorial_page():
    """docs/tutorials/NAME.ipynb is a relative link to notebooks/NAME.ipynb (one file, nothing to copy or go stale);
    the Tutorials page's toctree takes them all (glob)."""
    links = sorted((ROOT / "docs" / "tutorials").glob("*.ipynb"))
    assert [p.name for p in links] == [p.name for p in NOTEBOOKS]
    for link in links:
        assert link.is_symlink() and os.readlink(link) == f"../../notebooks/{link.name}", link
        assert link.resolve() == (ROOT / "notebooks" / link.name).resolve()


def test_a_broken_reference_to_an_slt_relu_name_fails_the_build(tmp_path):
    """nitpicky: a reference to a name slt_relu does not have fails the build; types of other packages are ignored,
    and an slt_relu object named under its defining module links to its entry under the curated name (the site's
    conf.py on a one-page site)."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "index.md").write_text("""# References

```{eval-rst}
.. autofunction:: slt_relu.sample
```

Resolve: {func}`slt_relu.sampling.sample`, {class}`slt_relu.posterior.target.TemperedTarget` (not in the API
reference: unlinked), {class}`numpy.ndarray`, {class}`jax.Array`, {class}`xarray.DataTree`.

Broken: {func}`slt_relu.no_such_function`, {class}`NoSuchClass`, {func}`slt_relu.sampling.no_such`.
""")
    run = sphinx(tmp_path / "src", tmp_path / "html", "--keep-going", "-c", str(ROOT / "docs"))
    assert run.returncode != 0
    warnings = re.findall(r"WARNING: (.*)", run.stderr)
    assert warnings == [f"py:{role} reference target not found: {name} [ref.{role}]" for role, name in
                        [("func", "slt_relu.no_such_function"), ("class", "NoSuchClass"),
                         ("func", "slt_relu.sampling.no_such")]], run.stderr
    page = (tmp_path / "html" / "index.html").read_text()
    assert re.search(r'href="#slt_relu.sample" title="slt_relu.sample"><code[^>]*><span class="pre">slt_relu.sampling'
                     r'.sample\(\)', page)                          # slt_relu.sampling.sample is slt_relu.sample


def test_the_home_pages_quickstart_runs_as_shown():
    """The home page's Python block runs as the page shows it, and its comments say what it computes: the
    Fisher rank of m_symmetric(3) is D - d = 13 - 3 (hand count: one scaling direction per node)."""
    (code,) = re.findall(r"^```python\n(.*?)^```$", (ROOT / "docs" / "index.md").read_text(), re.S | re.M)
    namespace = {}
    exec(code, namespace)
    assert namespace["rank"] == 13 - 3
    assert float(namespace["K"]) > 0                   # a random w is off the true set
