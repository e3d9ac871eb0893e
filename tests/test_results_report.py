"""The HTML report (``depthbench results --format html``) in a real headless browser: Debian's chromium, driven
by playwright's Python API. Every page renders, every image loads, no console errors, the tables hold the
expected cells — opened from the file system and from a static web server."""
import functools
import http.server
import shutil
import threading
from pathlib import Path

import pytest

from harness.cli import main as depthbench

FIXTURES = Path(__file__).parent / "fixtures" / "results"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PAGES = ["index.html", "status.html", "demo.html", "runs.html"]


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).is_file():
        pytest.fail("chromium is not installed: the HTML report test drives it headless. Install it with "
                    "`apt-get install -y --no-install-recommends chromium` (make setup does this as root)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the playwright package is missing: run make setup (pip install playwright)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The demo tables with the hand-written runs and the architecture audit, as a user builds it."""
    out = tmp_path_factory.mktemp("report")
    mp = pytest.MonkeyPatch()
    mp.setenv("DEPTHBENCH_CACHE", str(tmp_path_factory.mktemp("cache")))
    try:
        assert depthbench(["results", "--file", str(FIXTURES / "demo.yaml"), "--runs", str(FIXTURES / "runs"),
                           "--format", "html", "--out", str(out)]) == 0
    finally:
        mp.undo()
    return out


def visit(browser, url: str):
    """Open ``url``; returns (page, console errors, failed requests)."""
    page = browser.new_page()
    errors, failed = [], []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("requestfailed", lambda request: failed.append(request.url))
    response = page.goto(url, wait_until="load")
    assert response is None or response.ok, url
    return page, errors, failed


def check_page(page, errors, failed, name: str) -> None:
    assert not errors and not failed, (name, errors, failed)
    assert page.title().endswith("— depthbench")
    images = page.eval_on_selector_all("img", "els => els.map(e => [e.getAttribute('src'), e.complete && "
                                              "e.naturalWidth > 0])")
    assert all(ok for _, ok in images), (name, images)
    links = page.eval_on_selector_all("header a", "els => els.map(e => e.getAttribute('href'))")
    assert set(PAGES) <= set(links)


def row_cells(page, table_id: str, row: str) -> list[str]:
    return page.eval_on_selector_all(
        f"#{table_id} tbody tr",
        "(trs, row) => { const tr = trs.find(t => t.querySelector('th').firstChild.textContent.trim() === row);"
        " return tr ? [...tr.querySelectorAll('td')].map(td => [...td.querySelectorAll('span')]"
        ".map(s => s.textContent).join(' | ')) : null; }", row)


def test_every_page_renders_from_the_file_system(browser, report):
    assert sorted(p.name for p in report.glob("*.html")) == sorted(PAGES)
    for name in PAGES:
        page, errors, failed = visit(browser, (report / name).as_uri())
        check_page(page, errors, failed, name)
        page.close()
    page, errors, failed = visit(browser, (report / "demo.html").as_uri())
    # ResNet-18: params from the audit (11,689,512 -> 11.69, ✓), top-1 three seeds 70.0/70.5/71.0
    assert row_cells(page, "table-1", "ResNet-18") == [
        "11.7 | 11.69 ✓ | Δ -0.01", "70.2 | 70.5 ± 0.5 (n=3) [3 done, 1 running] | Δ +0.3"]
    assert row_cells(page, "table-1", "↳ reduced: embedded digits 16px, 20 epochs") == ["", "95.0"]
    assert row_cells(page, "table-2", "Swin-T") == ["1x", "43.7 | 44.1 | Δ +0.4", "39.8 | 40.2 | Δ +0.4"]
    assert "not reproduced: the OCR lost this row" in page.inner_text("#table-1")
    page.close()
    page, errors, failed = visit(browser, (report / "status.html").as_uri())
    assert "the OCR lost this row" in page.inner_text("main")
    page.close()


def test_the_report_works_from_a_static_server(browser, report):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(report))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        for name in PAGES:
            page, errors, failed = visit(browser, f"http://127.0.0.1:{server.server_port}/{name}")
            check_page(page, errors, failed, name)
            page.close()
    finally:
        server.shutdown()


def test_all_five_papers_render(browser, tmp_path, monkeypatch):
    """The real tables of all five papers (architecture audit left out: it is cached, but a fresh CI machine
    would measure every model) with the fixture runs: every page and figure loads."""
    monkeypatch.setenv("DEPTHBENCH_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "report"
    assert depthbench(["results", "--runs", str(FIXTURES / "runs"), "--format", "html", "--out", str(out),
                       "--no-audit"]) == 0
    papers = ["stepsnet", "sret", "transnext", "horesnet", "scalenet"]
    for name in ["index.html", "status.html", "runs.html"] + [f"{p}.html" for p in papers]:
        page, errors, failed = visit(browser, (out / name).as_uri())
        assert not errors and not failed, (name, errors, failed)
        images = page.eval_on_selector_all("img", "els => els.map(e => e.complete && e.naturalWidth > 0)")
        assert all(images), name
        if name == "stepsnet.html":
            assert len(images) >= 1 and page.locator("table.paper-table").count() >= 10
            # the fixture's ResNet-18 runs match StepsNet Table 1's ResNet-18 row (same config)
            cells = row_cells(page, "table-1", "ResNet-18")
            assert cells[-1] == "70.2 | 70.5 ± 0.5 (n=3) [3 done, 1 running] | Δ +0.3"
        page.close()
