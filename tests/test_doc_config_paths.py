"""Every config a user is pointed to exists (issue 45): the config paths and names in README, docs/, the configs'
own comments and the commands' help texts (``finetune --help`` named a ``..._2k_embedded-coco.py`` that never
existed). Brace lists (``{a,b}_x.py``) and ``*`` patterns are expanded against configs/; a file the README creates
itself (``cat > NAME.py <<``) counts as existing."""

import fnmatch
import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "configs").rglob("*.py"))
NAMES = {Path(p).name for p in CONFIGS}
# a path under configs/, or a bare name shaped like our configs' (<model>_<gpus>x<batch>-<length>_<data>.py)
PATH = re.compile(r"(?<![\w/.-])configs/[\w./{},*-]+?\.py\b")
NAME = re.compile(r"(?<![\w/.{},*-])[\w.{},*-]*_(?:\d+xb\d+|[\w.-]*(?:\d+e|\d+k?it))[\w.{},*-]*\.py\b")


def _sources() -> dict[str, str]:
    texts = {"README.md": (ROOT / "README.md").read_text()}
    texts.update({p.relative_to(ROOT).as_posix(): p.read_text() for p in sorted((ROOT / "docs").rglob("*.md"))})
    for path in CONFIGS:  # comments only: the code's _base_ paths are checked by loading the configs
        texts[path] = "\n".join(
            line[line.index("#") :] for line in (ROOT / path).read_text().splitlines() if "#" in line
        )
    # the commands' help texts, and the configs the demo runs (harness/workflows/demo.py)
    for path in sorted([*(ROOT / "harness" / "commands").glob("*.py"), *(ROOT / "harness" / "workflows").glob("*.py")]):
        texts[path.relative_to(ROOT).as_posix()] = path.read_text()
    return texts


def _expand(text: str) -> list[str]:
    """``a/{x,y}_z.py`` -> ``a/x_z.py``, ``a/y_z.py``; an f-string's ``{name}`` -> ``*``."""
    parts = re.split(r"\{([^{}]*)\}", text)
    choices = [[p] if i % 2 == 0 else p.split(",") if "," in p else ["*"] for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def _named(text: str) -> list[str]:
    created = set(re.findall(r"cat > ([\w.-]+\.py) <<", text))
    text = re.sub(r"\{[^{}]*\}", lambda m: re.sub(r"\s+", "", m.group(0)), text)  # a brace list wrapped in prose
    found = [m.group(0) for m in PATH.finditer(text)]
    found += [m.group(0) for m in NAME.finditer(text) if m.group(0) not in created and "(" not in m.group(0)]
    return [p for token in found for p in _expand(token)]


def _exists(token: str) -> bool:
    if token.startswith("configs/"):
        return any(fnmatch.fnmatchcase(p, token) for p in CONFIGS) if "*" in token else (ROOT / token).is_file()
    return any(fnmatch.fnmatchcase(name, token) for name in NAMES)


@pytest.mark.parametrize("source", sorted(_sources()))
def test_every_config_named_exists(source):
    missing = sorted({token for token in _named(_sources()[source]) if not _exists(token)})
    assert not missing, f"{source} names configs that do not exist: {missing}"


def test_the_check_sees_paths_names_braces_and_patterns():
    """The patterns find what the sources write (so an empty result above is not a blind check)."""
    text = (
        "run `depthbench finetune configs/det/mask-rcnn_steps-resnet18-w32_fpn_2k_embedded-coco.py`; "
        "its best.pth initialises upernet_steps-resnet18-w32-digits-pre_200it_embedded-ade.py; "
        "configs/stepsnet/{transformer-lm-30m,steps-lm-30m}_8xb128-20e_wikitext103-lm.py; "
        "configs/seg/transnext/*_tta-interpolate.py; cat > mine_1xb64-2e_digits.py <<'EOF' ... "
        "mine_1xb64-2e_digits.py; f\"horesnet{d}-{s}-w16_1xb64-{e}e_glyphs-16px.py\""
    )
    named = _named(text)
    assert named == [
        "configs/det/mask-rcnn_steps-resnet18-w32_fpn_2k_embedded-coco.py",
        "configs/stepsnet/transformer-lm-30m_8xb128-20e_wikitext103-lm.py",
        "configs/stepsnet/steps-lm-30m_8xb128-20e_wikitext103-lm.py",
        "configs/seg/transnext/*_tta-interpolate.py",
        "upernet_steps-resnet18-w32-digits-pre_200it_embedded-ade.py",
        "horesnet*-*-w16_1xb64-*e_glyphs-16px.py",
    ]
    assert [_exists(t) for t in named] == [False, True, True, True, False, True]
