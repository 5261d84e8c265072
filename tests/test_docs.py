"""The documentation site (docs/) builds with warnings as errors, every cross-reference resolves (nitpicky), its
API reference renders every name of the curated slt_relu namespace, and its Tutorials are the notebooks."""
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat

import slt_relu

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def sphinx(src, out, *options):
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "-E", "-q", "--no-color", "-b", "html", *options, str(src), str(out)],
                          capture_output=True, text=True, timeout=600)


def test_every_public_name_has_an_entry_in_the_api_reference():
    text = (ROOT / "docs" / "api.md").read_text()
    entries = set(re.findall(r"\.\. auto(?:function|class|module):: slt_relu\.(\w+)", text))
    assert sorted(set(slt_relu.__all__) - entries) == []
    assert sorted(entries - set(slt_relu.__all__)) == []           # and nothing outside it


def test_the_site_builds_without_a_warning(tmp_path):
    """README's docs command: a broken reference, a docstring reST cannot read or a page outside the table of
    contents fails it (-W)."""
    run = sphinx(ROOT / "docs", tmp_path / "html")
    assert run.returncode == 0, run.stderr[-3000:]
    for path in NOTEBOOKS:                                         # a tutorial page per notebook, with its figures
        images = sum("image/png" in o.get("data", {}) for c in nbformat.read(path, as_version=4).cells
                     for o in c.get("outputs", []))
        tutorial = (tmp_path / "html" / "tutorials" / f"{path.stem}.html").read_text()
        assert tutorial.count("<img ") == images > 0, path.name
    page = (tmp_path / "html" / "api.html").read_text()
    for name in slt_relu.__all__:                                  # a function or class, or a module's page
        assert f'id="slt_relu.{name}"' in page or f'id="module-slt_relu.{name}"' in page, name


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
