"""``depthbench models`` end to end (harness/commands/models.py over harness/measure/catalog.py)."""

import re

import pytest

from harness import cli
from harness.measure import catalog as model_list


@pytest.mark.tier("integration")
def test_rows_are_printed_as_each_model_is_counted(capsys, monkeypatch):
    real_describe = model_list.describe
    printed_before = []

    def describe(name, family, with_flops=True, cache=None):
        printed_before.append(capsys.readouterr().out)  # what the user saw before this model was counted
        return real_describe(name, family, with_flops, cache)

    monkeypatch.setattr(model_list, "describe", describe)
    assert cli.main(["models", "horesnet10_*", "--no-flops"]) == 0
    names = [n for n, _ in model_list.registered() if n.startswith("horesnet10_")]
    assert len(printed_before) == len(names) > 2
    assert printed_before[0].startswith("model ")  # the header comes first
    for k in range(1, len(names)):
        assert printed_before[k].split()[0] == names[k - 1]  # the previous row, before the next count


@pytest.mark.tier("integration")
def test_no_match_is_one_line_and_exit_2(capsys):
    assert cli.main(["models", "no_such_model*"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "depthbench models: error: no model matches 'no_such_model*'; patterns are shell-style, "
        "e.g. 'steps_*' or '*rk4*'"
    )


@pytest.mark.tier("integration")
def test_counts_are_cached_by_the_code_that_defines_the_model(monkeypatch, tmp_path, capsys):
    """Issue 26: `depthbench models` measured every model on every call (2.5 min). Counts are now measured once
    per version of the model's source file (harness/measure/cache.py) and read back after that."""
    from harness.measure import flops

    monkeypatch.setenv("DEPTHBENCH_CACHE", str(tmp_path))
    assert cli.main(["models", "horesnet10_*", "--json"]) == 0
    first = capsys.readouterr()
    # piped (no progress bar): the line says a wait is coming only while counts are missing (issue 45)
    assert "counting 4 of 4 models not in the measurement cache yet" in first.err
    monkeypatch.setattr(flops, "count_params", lambda model: pytest.fail("counted again"))
    monkeypatch.setattr(flops, "count_flops", lambda *a, **k: pytest.fail("counted again"))
    assert cli.main(["models", "horesnet10_*", "--json"]) == 0
    again = capsys.readouterr()
    assert again.out == first.out
    assert "take" not in again.err and "while" not in again.err, again.err


@pytest.mark.tier("integration")
def test_the_first_models_says_what_it_counts_and_how_long_it_took(capsys, monkeypatch, tmp_path):
    """Issue 58 item 5: a first `models` (nothing cached) says up front what it is counting, where the counts go
    and about how long it takes, and at the end how long it took; a second one counts nothing and says nothing."""
    monkeypatch.setenv("DEPTHBENCH_CACHE", str(tmp_path))
    assert cli.main(["models", "horesnet10_rk*", "--no-flops"]) == 0
    captured = capsys.readouterr()
    assert "depthbench models: counting 1 of 1 model not in the measurement cache yet" in captured.err
    assert "about a minute" in captured.err and str(tmp_path) in captured.err
    assert re.search(r"\n1 model \(1 counted in \d+ s, cached\)\n$", captured.out), captured.out
    assert cli.main(["models", "horesnet10_rk*", "--no-flops"]) == 0
    again = capsys.readouterr()
    assert again.err == "" and again.out.endswith("\n1 model\n")
