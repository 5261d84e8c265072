r"""Check the built documentation site in a real browser, as a reader sees it in a window 1280 px wide.

    python docs/check_site.py [BUILD_DIR] [--screenshots DIR]

BUILD_DIR is README's build output (default docs/_build/html).  The site is served on 127.0.0.1 (a free port,
http.server in a thread) and every .html page under BUILD_DIR is opened in headless Chromium, which checks that

- the page loads with no error in the browser's console (SEVERE log entries: a script that throws, a
  stylesheet, script or image of the site that does not load; not the /favicon.ico the browser asks for on
  its own, which a site without an icon does not have), and asks nothing of another host;
- every <img> has loaded (naturalWidth > 0);
- every internal link (same host) resolves: the file exists and, for a link with a #fragment to an HTML page,
  an element with that id (or an <a name>) exists on the target page;
- once MathJax has typeset the page (MathJax.startup.promise), every formula is rendered: no MathJax error
  (data-mjx-error: an unknown macro, a TeX syntax error), no math element left untypeset, and no TeX in the
  visible text outside <pre> and <code> (a delimiter \( \) \[ \] or $$, a command such as \lambda or \frac,
  $...$ around ^ _ { } or a backslash);
- on every page but the API reference's (api*, _modules/, generated stubs, whose signatures are long by
  nature): no <pre> scrolls sideways (scrollWidth > clientWidth + 1), no table is wider than its column, no
  table cell clips its text, no display formula is wider than its column, and every content figure (not an
  icon or a logo, at least 64 px wide) sits in a link to its own file, so that it opens at full size.

The browser reaches no other host (--host-resolver-rules), so the check is the same with or without a
network: a resource from another host (MathJax from a CDN, an image) is a failure, since the site must work
offline; links to other hosts are counted, not followed.  It prints a summary (pages, images, internal links
checked, formulas rendered, failures), then each failure naming its page, and exits 1 on any failure.

--screenshots DIR saves PNGs 1280 px wide of the pages of SCREENSHOTS below (the home page, a concept page
with formulas, the API entry of sample_posterior and the API landing page, the plotting how-to, an experiment
page and its headline numbers): a page from its top (up to 4000 px), or, for a #fragment, a window's height from that element.  A
page the build does not have is skipped with a line saying so.

Needs Chromium and its driver (on Debian, about 20 s: apt-get install -y chromium chromium-driver) and
selenium (in the dev extras).  The driver is /usr/bin/chromedriver and the browser /usr/bin/chromium
(--chromedriver, --chromium): given a driver path, Selenium Manager downloads nothing.
"""
import argparse
import functools
import http.server
import re
import sys
import threading
import time
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

PAGE_TIMEOUT_S = 20


def serve(root: Path) -> http.server.ThreadingHTTPServer:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def browser(chromium: str, chromedriver: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", f"--window-size={WIDTH},{HEIGHT}",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--hide-scrollbars"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)


PAGE_STATE = """
const images = Array.from(document.images);
images.forEach(i => { if (i.loading === 'lazy') i.loading = 'eager'; });
// MathJax typesets after the page has loaded: startup.promise settles when the first typesetting is done
let math = 'none';
if (document.querySelector('.math')) {
  const mj = window.MathJax;
  if (mj && mj.startup && mj.startup.promise) {
    if (!window.siteCheckMath) {
      window.siteCheckMath = 'typesetting';
      mj.startup.promise.then(() => { window.siteCheckMath = 'done'; },
                              e => { window.siteCheckMath = 'failed: ' + e; });
    }
    math = window.siteCheckMath;
  } else {
    math = 'MathJax not loaded';
  }
}
return {
  ready: document.readyState === 'complete' && images.every(i => i.complete)
         && (math === 'none' || math === 'done' || math.startsWith('failed')),
  math: math,
  images: images.map(i => [i.src, i.naturalWidth]),
  links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
  ids: Array.from(document.querySelectorAll('[id]')).map(e => e.id)
       .concat(Array.from(document.querySelectorAll('a[name]')).map(a => a.name)),
};
"""

# What a reader sees once the page has loaded and MathJax has typeset it: TeX source left in the visible text, and
# (unless arguments[0] is false: the API reference) what does not fit the 1280 px window or cannot be enlarged.
PAGE_CHECKS = r"""
const layout = arguments[0];
const main = document.querySelector('[role=main]') || document.body;
const shown = e => e.checkVisibility({visibilityProperty: true, checkVisibilityCSS: true});
const snippet = (text, at) => text.slice(Math.max(0, at - 30), at + 50).replace(/\s+/g, ' ').trim();
const failures = [];
// TeX outside code: a delimiter, $$, a command of two or more letters, or $...$ around ^ _ { } or a backslash
const tex = /\\[()\[\]]|\$\$|\\[A-Za-z]{2,}|\$[^$\s][^$]*[\\^_{}][^$]*\$/;
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  const parent = node.parentElement;
  if (!parent || parent.closest('pre, code, kbd, samp, script, style, textarea, mjx-container') || !shown(parent))
    continue;
  const found = tex.exec(node.data);
  if (found) failures.push('TeX source shown: "' + snippet(node.data, found.index) + '"');
}
for (const error of document.querySelectorAll('[data-mjx-error]'))
  failures.push('MathJax error: ' + error.getAttribute('data-mjx-error'));
for (const math of document.querySelectorAll('.math'))
  if (!math.querySelector('mjx-container'))
    failures.push('formula not typeset: "' + snippet(math.textContent, 0) + '"');
if (layout) {
  for (const pre of main.querySelectorAll('pre')) {
    if (!shown(pre) || pre.scrollWidth <= pre.clientWidth + 1) continue;
    const line = pre.textContent.split('\n').reduce((a, b) => (b.length > a.length ? b : a), '');
    failures.push(`code scrolls sideways by ${pre.scrollWidth - pre.clientWidth} px: "${snippet(line, 0)}"`);
  }
  for (const formula of main.querySelectorAll('mjx-container[display="true"]')) {
    const over = formula.scrollWidth - formula.clientWidth;
    if (shown(formula) && over > 1)
      failures.push(`formula ${over} px wider than its column: "${snippet((formula.closest('.math') || formula).textContent, 0)}"`);
  }
  for (const table of main.querySelectorAll('table')) {
    if (!shown(table)) continue;
    const box = table.parentElement, style = getComputedStyle(box);   // the theme's wrapper scrolls a wide table
    const over = table.offsetWidth - (box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight));
    const head = snippet(table.rows.length ? table.rows[0].textContent : '', 0);
    if (over > 1) failures.push(`table ${Math.round(over)} px wider than its column: "${head}"`);
    for (const cell of table.querySelectorAll('th, td'))
      if (cell.scrollWidth > cell.clientWidth + 1)
        failures.push(`table cell clipped by ${cell.scrollWidth - cell.clientWidth} px: "${snippet(cell.textContent, 0)}"`);
  }
  // a content figure opens at full size: it sits in a link to its own file (icons and logos are exempt)
  for (const img of main.querySelectorAll('img')) {
    if (img.closest('.icon, .logo, .sidebar-logo') || img.getBoundingClientRect().width < 64) continue;
    const link = img.closest('a[href]');
    if (!link || link.href !== img.src) failures.push('figure not linked to its full-size file: ' + img.src);
  }
}
return {failures: failures, formulas: document.querySelectorAll('mjx-container').length};
"""

# Pages whose width is not checked: the API reference (signatures and docstrings rendered by autodoc, with long
# names and types) and the highlighted sources it links to.
NO_LAYOUT_CHECK = re.compile(r"^(api[^/]*\.html|api/|_modules/)|(^|/)(generated|_autosummary)/")

# The pages --screenshots saves, by label: alternatives in order (the first that the build has); a #fragment
# shows the viewport at that element instead of the page from its top.
SCREENSHOTS = {
    "home": ["index.html"],
    "concept": ["concepts/learning_coefficient.html", "concepts/free_energy.html"],
    "api": ["api/slt_relu.posterior.sample.html#slt_relu.posterior.sample.sample_posterior"],
    "api_index": ["api/index.html"],
    "plot": ["howto/plot.html"],
    "experiment": ["experiments/dslt4_pt1_smc.html"],
    "headline": ["experiments/dslt4_pt1_smc.html#headline-numbers"],
}
WIDTH, HEIGHT, MAX_HEIGHT = 1280, 900, 4000


def visit(driver, url: str) -> dict:
    driver.get(url)
    deadline = time.monotonic() + PAGE_TIMEOUT_S
    while True:
        state = driver.execute_script(PAGE_STATE)
        if state["ready"] or time.monotonic() > deadline:
            return state
        time.sleep(0.05)


def screenshot(driver, url: str, path: Path) -> None:
    """A PNG WIDTH px wide: the page from its top (up to MAX_HEIGHT px), or, for a URL with a #fragment, a
    window's height from that element down."""
    url, fragment = urldefrag(url)
    visit(driver, url)              # without the fragment: the theme would scroll to it smoothly, taking its time
    if fragment:
        driver.set_window_size(WIDTH, 2 * HEIGHT)
    else:
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(WIDTH, min(max(height, HEIGHT), MAX_HEIGHT))
    time.sleep(0.3)                                    # the page lays itself out again at the new size
    if fragment:
        driver.execute_script("const e = document.getElementById(arguments[0]); "
                              "if (e) e.scrollIntoView({behavior: 'instant'});", unquote(fragment))
        time.sleep(0.1)
    driver.save_screenshot(str(path))
    driver.set_window_size(WIDTH, HEIGHT)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", nargs="?", default=str(Path(__file__).parent / "_build" / "html"), type=Path)
    parser.add_argument("--screenshots", type=Path, help="save PNGs of the pages of SCREENSHOTS here")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args(argv)
    root = args.build.resolve()
    pages = sorted(root.rglob("*.html"))
    if not (root / "index.html").is_file():
        print(f"no site at {root}: build it first (README's docs command)", file=sys.stderr)
        return 2

    server = serve(root)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    driver = browser(args.chromium, args.chromedriver)
    failures, states = [], {}
    images = external = checked = formulas = 0
    started = time.monotonic()
    try:
        driver.get_log("browser")                                # start with an empty log
        for page in pages:
            name = page.relative_to(root).as_posix()
            state = states[name] = visit(driver, base + name)
            if not state["ready"]:
                failures.append(f"{name}: not loaded in {PAGE_TIMEOUT_S} s (math: {state['math']})")
            elif state["math"] != "none" and state["math"] != "done":
                failures.append(f"{name}: MathJax {state['math']}")
            for entry in driver.get_log("browser"):
                if entry["level"] != "SEVERE":
                    continue
                message = entry["message"]
                source = message.split(" ", 1)[0]
                if source.startswith("http") and not source.startswith(base) and "ERR_NAME_NOT_RESOLVED" in message:
                    failures.append(f"{name}: a resource from another host, which the site must not need: {source}")
                elif source != base + "favicon.ico":                 # asked for by the browser, not by the site
                    failures.append(f"{name}: console: {message}")
            for src, width in state["images"]:
                images += 1
                if not width and (src.startswith(base) or not src.startswith(("http:", "https:"))):
                    failures.append(f"{name}: image not loaded: {src}")
            shown = driver.execute_script(PAGE_CHECKS, not NO_LAYOUT_CHECK.search(name))
            formulas += shown["formulas"]
            failures += [f"{name}: {failure}" for failure in shown["failures"]]
        for name, state in states.items():
            for href in state["links"]:
                if not href.startswith(base):
                    external += href.startswith(("http:", "https:"))
                    continue
                checked += 1
                url, fragment = urldefrag(href)
                target = unquote(urlsplit(url).path).lstrip("/")
                if target == "" or target.endswith("/"):
                    target += "index.html"
                if not (root / target).is_file():
                    failures.append(f"{name}: link to a missing file: {href}")
                elif fragment and target.endswith(".html") and unquote(fragment) not in states[target]["ids"] \
                        and fragment.lower() != "top":
                    failures.append(f"{name}: link to a missing anchor: {href}")
        if args.screenshots:
            args.screenshots.mkdir(parents=True, exist_ok=True)
            for label, choices in SCREENSHOTS.items():
                page = next((c for c in choices if (root / urldefrag(c).url).is_file()), None)
                if page is None:
                    print(f"screenshot {label}: none of {', '.join(choices)} is in the build, skipped")
                    continue
                path = args.screenshots / f"{label}.png"
                screenshot(driver, base + page, path)
                print(f"screenshot {path} ({page})")
    finally:
        driver.quit()
        server.shutdown()

    print(f"{len(pages)} pages, {images} images, {checked} internal links checked ({external} to other hosts not "
          f"followed), {formulas} formulas rendered in {time.monotonic() - started:.1f} s: {len(failures)} failures")
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
