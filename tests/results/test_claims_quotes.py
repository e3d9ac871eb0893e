"""Every claim quotes its paper verbatim: each `quote` of results/tables/claims/*.yaml is found, whitespace aside,
in the paper's text. The texts are not in the repository (copyright): $DEPTHBENCH_PAPER_TEXTS names a folder of
them (default: ../shared/seeds beside the checkout); without it the test skips and says so."""

import os
from pathlib import Path

import pytest

from results.claims import REPO, available_claims, load_claims

TEXTS = Path(os.environ.get("DEPTHBENCH_PAPER_TEXTS", REPO.parent / "shared" / "seeds"))
TITLES = {
    "stepsnet": "Step by Step Network",
    "sret": "SLICED RECURSIVE TRANSFORMER",
    "transnext": "TransNeXt:",
    "horesnet": "Rethinking ResNets",
    "scalenet": "ScaleNet: Scaling up",
}


def paper_text(paper: str) -> str:
    if not TEXTS.is_dir():
        pytest.skip(f"no paper texts at {TEXTS} (set DEPTHBENCH_PAPER_TEXTS)")
    for path in sorted(TEXTS.glob("*.txt")):
        text = path.read_text(errors="replace")
        if TITLES[paper] in text[:400]:
            return " ".join(text.split())
    pytest.skip(f"no text of {paper} in {TEXTS}")


@pytest.mark.parametrize("paper", available_claims())
def test_every_quote_is_verbatim(paper):
    text = paper_text(paper)
    for claim in load_claims(paper).claims:
        assert claim.text in text, f"{paper}/{claim.id}: {claim.text!r} is not in the paper's text"
