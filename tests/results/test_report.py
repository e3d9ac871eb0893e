"""results.report: the HTML report (``depthbench results --format html``) in a real headless browser: Debian's
chromium, driven by playwright's Python API. Every page renders, every image loads, no console errors, the tables
hold the expected cells — opened from the file system and from a static web server. The site copies only plain
files from inside the claims folder; runs.html shows a ``depthbench test`` run's metrics and the setting of the run
it tested (issue 45)."""

import contextlib
import functools
import html
import http.server
import io
import re
import threading
from pathlib import Path

import pytest

from fixtures.paper_views import FIXTURES, SHORTENED
from fixtures.paper_views import finetune_and_test as _finetune_and_test
from harness.cli import main as depthbench
from pages import visit

PAGES = ["index.html", "status.html", "demo.html", "claims.html", "runs.html"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The demo tables with the hand-written runs and the architecture audit, as a user builds it."""
    out = tmp_path_factory.mktemp("report")
    claims = write_claims_report(tmp_path_factory.mktemp("claims"))
    mp = pytest.MonkeyPatch()
    mp.setenv("DEPTHBENCH_CACHE", str(tmp_path_factory.mktemp("cache")))
    try:
        assert (
            depthbench(
                [
                    "results",
                    "--file",
                    str(FIXTURES / "demo.yaml"),
                    "--runs",
                    str(FIXTURES / "runs"),
                    "--format",
                    "html",
                    "--out",
                    str(out),
                    "--claims",
                    str(claims),
                ]
            )
            == 0
        )
    finally:
        mp.undo()
    return out


STEPS_DEIT = {"deit": [70.0, 71.0, 72.0], "steps-deit": [73.0, 74.5, 75.0]}  # a clear effect, 3 seeds


def write_claims_report(folder: Path) -> Path:
    """A `depthbench claims` report folder for StepsNet's DeiT claim from per-seed values (no training), one look
    of 3 seeds: the plan's repeated interval is then the plain paired t-interval."""
    from results.claims_run import write_report
    from results import claims as cl

    stepsnet = cl.load_claims("stepsnet")
    claim = next(c for c in stepsnet.claims if c.id == "steps-deit-vs-deit")
    values = {("stepsnet", arm): dict(enumerate(v)) for arm, v in STEPS_DEIT.items()}
    result = cl.evaluate([(claim, stepsnet.design)], values, {("stepsnet", claim.id): (3,)})
    write_report(result, [stepsnet], [], folder, quick=False)
    return folder


def check_page(page, errors, failed, name: str) -> None:
    assert not errors and not failed, (name, errors, failed)
    assert page.title().endswith("— depthbench")
    images = page.eval_on_selector_all(
        "img", "els => els.map(e => [e.getAttribute('src'), e.complete && e.naturalWidth > 0])"
    )
    assert all(ok for _, ok in images), (name, images)
    links = page.eval_on_selector_all("header a", "els => els.map(e => e.getAttribute('href'))")
    assert set(PAGES) <= set(links)


def row_cells(page, table_id: str, row: str) -> list[str]:
    return page.eval_on_selector_all(
        f"#{table_id} tbody tr",
        "(trs, row) => { const tr = trs.find(t => t.querySelector('th').firstChild.textContent.trim() === row);"
        " return tr ? [...tr.querySelectorAll('td')].map(td => [...td.querySelectorAll('span')]"
        ".map(s => s.textContent).join(' | ')) : null; }",
        row,
    )


def test_every_page_renders_from_the_file_system(browser, report):
    assert sorted(p.name for p in report.glob("*.html")) == sorted(PAGES)
    for name in PAGES:
        page, errors, failed = visit(browser, (report / name).as_uri())
        check_page(page, errors, failed, name)
        page.close()
    page, errors, failed = visit(browser, (report / "demo.html").as_uri())
    # ResNet-18: params from the audit (11,689,512 -> 11.69, ✓), top-1 three seeds 70.0/70.5/71.0
    assert row_cells(page, "table-1", "ResNet-18") == [
        "11.7 | 11.69 ✓ | Δ -0.01",
        "70.2 | 70.5 ± 0.5 (n=3) [3 done, 1 running] | Δ +0.3",
    ]
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
    assert (
        depthbench(["results", "--runs", str(FIXTURES / "runs"), "--format", "html", "--out", str(out), "--no-audit"])
        == 0
    )
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


def test_claims_page_shows_each_claim_with_its_interval_verdict_and_figures(browser, report):
    """claims.html: per claim the paper's numbers, both arms (mean ± std, n), the paired difference with its
    interval (computed here with scipy, not by the code under test) and the verdict; the dataset's samples and the
    claim's figure load. StepsNet's DeiT claim is descriptive in its file (a directional claim read at the file's
    alpha 0.05 one-sided: the two-sided 90 % interval) and gets no verdict."""
    from scipy import stats

    test = stats.ttest_rel(STEPS_DEIT["steps-deit"], STEPS_DEIT["deit"])
    ci = test.confidence_interval(0.90)
    diff, low, high = (ci.low + ci.high) / 2, ci.low, ci.high
    page, errors, failed = visit(browser, (report / "claims.html").as_uri())
    check_page(page, errors, failed, "claims.html")
    cells = page.eval_on_selector_all("main table tbody tr td", "tds => tds.map(td => td.textContent)")
    assert cells == [
        "Table 1: DeiT-T 72.2, Steps-DeiT-T 73.2",
        "deit 71.00 ± 1.00 (n=3)",
        "steps-deit 74.17 ± 1.04 (n=3)",
        f"{diff:+.2f}",
        f"[{low:+.2f}, {high:+.2f}] (paired)",
        "no verdict",
    ]
    assert "reduced setting" in page.inner_text("main")
    images = page.eval_on_selector_all("img", "els => els.map(e => e.getAttribute('src'))")
    assert images == ["figures/claims/glyphs-samples.png", "figures/claims/stepsnet-steps-deit-vs-deit.png"]
    page.close()


# ----------------------------------------------------------------------------------------- issue 26: small things
def page_fits(page) -> bool:
    """Nothing makes the page scroll sideways (a wide paper table scrolls inside its own box)."""
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_runs_page_fits_and_prints_counts_as_integers(browser, report):
    """runs.html printed `seed 0.0`, `epochs 8.0` and scrolled sideways; every page fits a 1280 px window."""
    for name in PAGES:
        page, errors, failed = visit(browser, (report / name).as_uri())
        assert page_fits(page), name
        if name == "runs.html":
            columns = page.eval_on_selector_all("table.runs thead th", "ths => ths.map(th => th.textContent)")
            cells = page.eval_on_selector_all(
                "table.runs tbody tr", "trs => trs.map(tr => [...tr.querySelectorAll('td')].map(td => td.textContent))"
            )
            for column in ("seed", "epochs", "eval_epoch"):
                values = [row[columns.index(column)] for row in cells]
                assert all(re.fullmatch(r"\d*", v) for v in values) and any(values), (column, values)
            assert "70.5" in [row[columns.index("metric.top1")] for row in cells]
        page.close()


def test_unchecked_cells_say_why(tmp_path, monkeypatch):
    """An architecture cell left unchecked (`unchecked:` in the tables file) carries a numbered note with its reason
    under the table, in every format (it said "unchecked" and nothing else)."""
    monkeypatch.setenv("DEPTHBENCH_CACHE", str(tmp_path / "cache"))
    tables = tmp_path / "tables.yaml"
    tables.write_text(
        "paper: demo\ntitle: A demo paper\ntables:\n  - id: '1'\n    caption: Params\n"
        "    columns: {params_m: '#Params (M)', top1: 'Top-1 (%)'}\n    rows:\n"
        "      - {name: ResNet-18, model: resnet18, paper: {params_m: 11.6, top1: 70.2},\n"
        "         unchecked: {params_m: 'the paper prints 11.6M, a typo for 11.7M'}}\n"
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert depthbench(["results", "--file", str(tables), "--runs", str(tmp_path)]) == 0
    text = out.getvalue()
    assert "11.6 / unchecked [1]" in text and "[1] unchecked: the paper prints 11.6M, a typo for 11.7M" in text, text
    site = tmp_path / "site"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert (
            depthbench(
                ["results", "--file", str(tables), "--runs", str(tmp_path), "--format", "html", "--out", str(site)]
            )
            == 0
        )
    page = (site / "demo.html").read_text()
    assert "unchecked [1]</span>" in page and "[1] unchecked: the paper prints 11.6M, a typo for 11.7M" in page


# ------------------------------------------------------------------------------------------- the site's files
def test_a_claims_figure_that_links_out_or_climbs_is_left_out_of_the_site(tmp_path, capsys):
    from results.report import _copy_figure

    figures, site = tmp_path / "claims" / "figures", tmp_path / "site"
    figures.mkdir(parents=True)
    site.mkdir()
    (tmp_path / "private.png").write_bytes(b"secret")
    (figures / "deit-a.png").symlink_to(tmp_path / "private.png")
    (figures / "deit-b.png").write_bytes(b"png")
    assert not _copy_figure(figures, "deit-a.png", site)
    assert not _copy_figure(figures, "../../private.png", site)
    assert _copy_figure(figures, "deit-b.png", site) and (site / "deit-b.png").read_bytes() == b"png"
    assert sorted(p.name for p in site.iterdir()) == ["deit-b.png"]
    err = capsys.readouterr().err
    assert "deit-a.png is a symbolic link" in err and "not a plain file name" in err


def test_runs_html_shows_a_test_runs_metrics(tmp_path, cli):
    _, test = _finetune_and_test(tmp_path / "runs")
    out = tmp_path / "site"
    done = cli(
        "results",
        "--file",
        FIXTURES / "demo.yaml",
        "--runs",
        tmp_path / "runs",
        "--format",
        "html",
        "--out",
        out,
        env={"DEPTHBENCH_CACHE": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    page = (out / "runs.html").read_text()
    head = [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<th>(.*?)</th>", page)]
    rows = [
        [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)]
        for r in re.findall(r"<tr>(.*?)</tr>", page.split("<tbody>")[1])
    ]
    (tested,) = [dict(zip(head, r)) for r in rows if r[head.index("run_id")] == test.name]
    assert tested["metric.bbox_mAP"] == "31.2" and tested["metric.segm_mAP"] == "28.7"
    assert tested["scale"].startswith("test of ") and SHORTENED in tested["scale"]
