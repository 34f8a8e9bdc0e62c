"""The documentation site's search, in a real browser: a prefixed name
(`af.normalize`, `eqx.tree_at`) and a snake_case one (`explain_retraces`) are
found by each of their parts, on every page that mentions them.

Builds the site with `mkdocs build --strict`, serves it over HTTP (the search
runs in a web worker, which a `file://` page may not start) and types each query
into the search box of headless Chromium (Debian's `chromium` and
`chromium-driver`; `.ci/run` installs them).
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import python

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs headless Chromium: apt-get install chromium chromium-driver "
    "(.ci/run installs them)",
)

# query -> the text whose pages it must find (each part of a name finds it too)
QUERIES = {
    "normalize": "normalize",
    "af.normalize": "normalize",
    "tree_at": "tree_at",
    "eqx.tree_at": "tree_at",
    "explain_retraces": "explain_retraces",
    "explain": "explain_retraces",
    "retraces": "explain_retraces",
}


def pages_mentioning(text: str) -> set[str]:
    """The site paths ("", "rules/", ...) of the pages whose source has `text`."""
    found = set()
    for page in (ROOT / "docs").glob("*.md"):
        if text in page.read_text().lower():
            found.add("" if page.stem == "index" else f"{page.stem}/")
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The built site, served on a free local port: its base URL."""
    directory = tmp_path_factory.mktemp("site")
    build = python(
        *("-m", "mkdocs", "build", "--strict", "-q", "--site-dir", directory),
        cwd=ROOT,
        # mkdocs-material prints an end-of-life notice unless told not to (README).
        env={"NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )
    assert build.returncode == 0, build.stderr
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass  # the test's output is the assertion, not an access log


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert CHROMIUM is not None and CHROMEDRIVER is not None  # else skipped
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def search(driver, base: str, query: str, expected: set[str]) -> set[str]:
    """The site paths of the pages the search box lists for `query`: all of
    them, or at least every page of `expected` once the list holds those."""
    from selenium.webdriver.common.by import By

    driver.get(base)
    box = driver.find_element(By.CSS_SELECTOR, "input[data-md-component=search-query]")
    driver.execute_script("document.querySelector('label[for=__search]').click()")
    box.send_keys(query)
    meta = driver.find_element(By.CSS_SELECTOR, ".md-search-result__meta")
    deadline = time.monotonic() + 30
    found: set[str] = set()
    while time.monotonic() < deadline:
        # Results render in batches, one each time the list's end comes into
        # view: leave the end, then scroll back to it, until all are in.
        for top in ("0", "s.scrollHeight"):
            driver.execute_script(
                "const s = document.querySelector('.md-search__scrollwrap');"
                f"if (s) s.scrollTop = {top};"
            )
            time.sleep(0.1)
        links = driver.find_elements(By.CSS_SELECTOR, "li.md-search-result__item > a")
        found = {
            link.get_attribute("href").split("#")[0].removeprefix(base)
            for link in links
        }
        count = meta.text.split(" ")[0]
        if count.isdigit() and int(count) == len(found) and found:
            return found
        # A query whose prefix matches every page ("af." in "af.normalize")
        # lists them all, and the last batch may not render on a slow host:
        # what the test asks is that the pages naming the query are listed.
        if expected and expected <= found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"search for {query!r}: {meta.text!r}, listed {found}")


@pytest.mark.parametrize("query", QUERIES)
def test_search_finds_every_page_that_mentions_a_name(site, browser, query):
    expected = pages_mentioning(QUERIES[query])
    assert len(expected) >= 2, expected  # the premise: a name on several pages
    found = search(browser, site, query, expected)
    assert expected <= found, f"{query!r} misses {sorted(expected - found)}"
