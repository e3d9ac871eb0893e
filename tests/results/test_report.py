"""results.report: the HTML site copies only plain files from inside the claims folder."""

from __future__ import annotations


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
