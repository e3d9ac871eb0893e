"""results.status: a table's status counts (rows, expressed, checkable, verified, run at the paper's setting or
reduced), its rows' reasons and its runs' scales.

The expected cells are computed by hand from the hand-written run fixtures in tests/fixtures/results/runs (see
the comments there and here), never copied from the code's output.
"""

import pytest

from fixtures.paper_views import fresh_audit, views_of
from results.status import table_status


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    yield from fresh_audit(tmp_path_factory)


def test_status_counts(audit):
    views, _, _ = views_of(audit=audit)
    s1, s2 = table_status(views[0]), table_status(views[1])
    assert (s1.rows, s1.expressed, s1.checkable, s1.verified) == (4, 3, 2, 2)
    assert (s1.run_paper, s1.run_reduced, s1.rendered) == (2, 1, 3)
    assert s1.reasons == [("Lost row", "the OCR lost this row")]
    assert s1.scales == [
        "digits 16px, 30 epochs; model depth=4, img_size=16, patch_size=4",
        "embedded digits 16px, 20 epochs",
    ]
    assert (s2.rows, s2.expressed, s2.checkable, s2.run_paper, s2.run_reduced, s2.rendered) == (2, 2, 0, 1, 0, 1)
