"""Check the built documentation site in a real browser: every page, image and internal link.

    python docs/check_site.py [BUILD_DIR] [--screenshots DIR]

BUILD_DIR is README's build output (default docs/_build/html).  The site is served on 127.0.0.1 (a free port,
http.server in a thread) and every .html page under BUILD_DIR is opened in headless Chromium, which checks that

- the page loads with no error in the browser's console (SEVERE log entries: a script that throws, a
  stylesheet, script or image of the site that does not load; not the /favicon.ico the browser asks for on
  its own, which a site without an icon does not have);
- every <img> has loaded (naturalWidth > 0);
- every internal link (same host) resolves: the file exists and, for a link with a #fragment to an HTML page,
  an element with that id (or an <a name>) exists on the target page.

The browser reaches no other host (--host-resolver-rules): the check is the same with or without a network.
A resource from elsewhere (MathJax from its CDN on a page with math, an image) is listed as blocked, not
counted as a failure; links to other hosts are counted, not followed.  It prints a summary (pages, images, links checked,
failures) and exits 1 on any failure.  --screenshots DIR saves PNGs (1280 px wide, up to 4000 px of each page)
of the home page, a concept page, a tutorial page, the API reference's landing page and a module's page (the one
of sample_posterior).

Needs Chromium and its driver (on Debian, about 20 s: apt-get install -y chromium chromium-driver) and
selenium (in the dev extras).

The driver is /usr/bin/chromedriver and the browser /usr/bin/chromium (--chromedriver, --chromium): given a
driver path, Selenium Manager downloads nothing.
"""
import argparse
import functools
import http.server
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
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--hide-scrollbars"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)


PAGE_STATE = """
const images = Array.from(document.images);
images.forEach(i => { if (i.loading === 'lazy') i.loading = 'eager'; });
return {
  ready: document.readyState === 'complete' && images.every(i => i.complete),
  images: images.map(i => [i.src, i.naturalWidth]),
  links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
  ids: Array.from(document.querySelectorAll('[id]')).map(e => e.id)
       .concat(Array.from(document.querySelectorAll('a[name]')).map(a => a.name)),
};
"""


def visit(driver, url: str) -> dict:
    driver.get(url)
    deadline = time.monotonic() + PAGE_TIMEOUT_S
    while True:
        state = driver.execute_script(PAGE_STATE)
        if state["ready"] or time.monotonic() > deadline:
            return state
        time.sleep(0.05)


def screenshot(driver, url: str, path: Path) -> None:
    driver.get(url)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(height, 900), 4000))
    time.sleep(0.3)
    driver.save_screenshot(str(path))
    driver.set_window_size(1280, 900)


def first(root: Path, pattern: str) -> Path | None:
    pages = sorted(p for p in root.glob(pattern) if p.name != "index.html")
    return pages[0] if pages else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", nargs="?", default=str(Path(__file__).parent / "_build" / "html"), type=Path)
    parser.add_argument("--screenshots", type=Path, help="save PNGs of four pages here")
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
    failures, blocked, states = [], {}, {}
    images = external = 0
    started = time.monotonic()
    try:
        driver.get_log("browser")                                # start with an empty log
        for page in pages:
            name = page.relative_to(root).as_posix()
            state = states[name] = visit(driver, base + name)
            if not state["ready"]:
                failures.append(f"{name}: not loaded in {PAGE_TIMEOUT_S} s")
            for entry in driver.get_log("browser"):
                if entry["level"] != "SEVERE":
                    continue
                message = entry["message"]
                source = message.split(" ", 1)[0]
                if source.startswith("http") and not source.startswith(base) and "ERR_NAME_NOT_RESOLVED" in message:
                    blocked.setdefault(source, []).append(name)      # another host: the browser reaches none
                elif source != base + "favicon.ico":                 # asked for by the browser, not by the site
                    failures.append(f"{name}: console: {message}")
            for src, width in state["images"]:
                images += 1
                if not width and (src.startswith(base) or not src.startswith(("http:", "https:"))):
                    failures.append(f"{name}: image not loaded: {src}")
        checked = 0
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
            chosen = {"home": root / "index.html", "concept": first(root, "concepts/*.html") or root / "concepts/index.html",
                      "tutorial": first(root, "tutorials/*.html"), "api": root / "api" / "index.html",
                      "api_module": root / "api" / "slt_relu.posterior.sample.html"}
            for label, page in chosen.items():
                page = page if page is not None and page.is_file() else root / "index.html"
                path = args.screenshots / f"{label}.png"
                screenshot(driver, base + page.relative_to(root).as_posix(), path)
                print(f"screenshot {path} ({page.relative_to(root).as_posix()})")
    finally:
        driver.quit()
        server.shutdown()

    print(f"{len(pages)} pages, {images} images, {checked} internal links checked ({external} to other hosts not "
          f"followed) in {time.monotonic() - started:.1f} s: {len(failures)} failures")
    for source, on in sorted(blocked.items()):
        print(f"blocked (another host, not a failure): {source} on {len(on)} pages")
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
