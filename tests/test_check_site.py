"""docs/check_site.py on a two-page site built with the site's conf.py: a page whose formulas (every syntax the site
uses), table, figure and code fit passes; a page that shows TeX source, a MathJax error, a code line or a formula
too wide for the column, a table wider than its column and a figure without its full-size link fails, each named.
Skipped where Chromium and its driver are not installed (apt-get install chromium chromium-driver)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")

pytestmark = pytest.mark.skipif(not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()),
                                reason="needs Chromium and its driver (apt-get install chromium chromium-driver)")

GOOD = r"""# Good

Inline $\lambda$ and {math}`\frac{1}{2}`, a display

$$
V(\varepsilon) = \int_{K(w) < \varepsilon} \varphi(w)\, dw
$$

and amsmath:

\begin{align}
a &= b + c \\
d &= e
\end{align}

```{eval-rst}
reST's role :math:`\log n` and directive:

.. math::

   Z(t) = \int \varphi(w)\, e^{-tK(w)}\, dw
```

| key | meaning |
|---|---|
| `cases[].beta_sweep.target_accept_prob` | a dotted name that may break after its dots |

```{figure} plot.png
:alt: a plot

A figure: a link to its file.
```

```python
print("a short line")
```
"""

BROKEN = r"""# Broken

An unknown macro: $\nosuchmacro{x}$.

Escaped, so not math: \\(\lambda\\).

```python
x = 1  # """ + "a comment that runs on " * 8 + r"""
```

$$
a_1 + a_2 + a_3 + a_4 + a_5 + a_6 + a_7 + a_8 + a_9 + a_{10} + a_{11} + a_{12} + a_{13} + a_{14} + a_{15} + a_{16}
+ a_{17} + a_{18} + a_{19} + a_{20} + a_{21} + a_{22} + a_{23} + a_{24} + a_{25} + a_{26} + a_{27} + a_{28}
$$

| name | value |
|---|---|
| """ + "x" * 200 + """ | 1 |

<img src="_images/plot.png" alt="an image without a link">
"""


def test_the_check_passes_a_page_that_fits_and_names_what_breaks_one(tmp_path):
    from matplotlib.figure import Figure

    src = tmp_path / "src"
    src.mkdir()
    fig = Figure(figsize=(3, 2))
    fig.subplots().plot([0, 1], [1, 0])
    fig.savefig(src / "plot.png")
    (src / "index.md").write_text(GOOD + "\n```{toctree}\nbroken\n```\n")
    (src / "broken.md").write_text(BROKEN)
    build = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-q", "--no-color", "-b", "html", "-c",
                            str(ROOT / "docs"), str(src), str(tmp_path / "html")],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    assert (tmp_path / "html" / "_static" / "mathjax" / "tex-svg-full.js").is_file()   # MathJax from the build
    run = subprocess.run([sys.executable, str(ROOT / "docs" / "check_site.py"), str(tmp_path / "html")],
                         capture_output=True, text=True, timeout=300)
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    summary = re.search(r"(\d+) pages, (\d+) images, .*?, (\d+) formulas rendered .*: (\d+) failures", out)
    assert summary, out
    assert int(summary.group(3)) >= 6, out           # the good page's five formulas and the broken page's
    assert "another host, which" not in out          # nothing asked of another host
    failures = re.findall(r"^FAIL (\S+): (.*)$", out, re.M)
    assert not [f for f in failures if f[0] != "broken.html"], out
    found = "\n".join(f[1] for f in failures)
    for expected in (r"MathJax error: Undefined control sequence \\nosuchmacro",
                     r'TeX source shown: "Escaped, so not math: \\\(\\lambda\\\)',
                     r'code scrolls sideways by \d+ px: "x = 1 # a comment',
                     r"formula \d+ px wider than its column",
                     r'table \d+ px wider than its column: "name value"',
                     r"figure not linked to its full-size file: \S+/_images/plot.png"):
        assert re.search(expected, found), (expected, out)
    assert len(failures) == int(summary.group(4))
