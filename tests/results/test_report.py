"""results.report: the HTML site copies only plain files from inside the claims folder; runs.html shows a
``depthbench test`` run's metrics and the setting of the run it tested (issue 45)."""

from __future__ import annotations

import html
import re

from fixtures.paper_views import FIXTURES, SHORTENED
from fixtures.paper_views import finetune_and_test as _finetune_and_test


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
