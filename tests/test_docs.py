"""The documentation site (docs/) builds with warnings as errors, and its API reference renders every name
of the curated slt_relu namespace."""
import re
import subprocess
import sys
from pathlib import Path

import slt_relu

ROOT = Path(__file__).resolve().parent.parent


def test_every_public_name_has_an_entry_in_the_api_reference():
    text = (ROOT / "docs" / "api.md").read_text()
    entries = set(re.findall(r"\.\. auto(?:function|class|module):: slt_relu\.(\w+)", text))
    assert sorted(set(slt_relu.__all__) - entries) == []
    assert sorted(entries - set(slt_relu.__all__)) == []           # and nothing outside it


def test_the_site_builds_without_a_warning(tmp_path):
    """README's docs command: a broken reference, a docstring reST cannot read or a page outside the table of
    contents fails it (-W)."""
    run = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-E", "-q", "-b", "html", str(ROOT / "docs"),
                          str(tmp_path / "html")], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    page = (tmp_path / "html" / "api.html").read_text()
    for name in slt_relu.__all__:                                  # a function or class, or a module's page
        assert f'id="slt_relu.{name}"' in page or f'id="module-slt_relu.{name}"' in page, name
