"""The front door (issue 56): README is a front page that sends each of the five jobs to its guide, and the
documentation site (mkdocs.yml, docs/) builds strictly -- every page in the navigation, every link and anchor
resolves -- with the configuration and CLI references generated from the code holding every schema key and every
command and option."""

import argparse
import html
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.cli import build_parser
from harness.core import schema

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "tools" / "docs_reference.py")
docs_reference = importlib.util.module_from_spec(spec)  # tools/ is not a package (as tests/tools/test_setup_env.py)
spec.loader.exec_module(docs_reference)

README = ROOT / "README.md"
# the five user jobs: the command README shows for each, and the guide it links to
JOBS = {
    "depthbench train": "docs/guides/pretraining.md",
    "depthbench finetune": "docs/guides/finetuning.md",
    "depthbench submit": "docs/guides/slurm.md",
    "depthbench results": "docs/guides/results.md",
    "depthbench claims": "docs/guides/claims.md",
}
MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
DATED = re.compile(
    rf"\b\d{{1,2}} (?:{MONTHS})[a-z]* \d{{4}}\b|\b(?:{MONTHS})[a-z]* \d{{4}}\b|\b20\d\d-\d\d-\d\d\b"
    r"|\b\d\d:\d\d(?:[–-]\d\d:\d\d)? UTC\b|\bissue \d+\b",
    re.I,
)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _mkdocs(config: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(out.parent)},
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "site"
    done = _mkdocs(ROOT / "mkdocs.yml", out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _page(site: Path, doc: str) -> str:
    """The built HTML of ``doc`` (a path under docs/, e.g. guides/slurm.md)."""
    return (
        (site / Path(doc).with_suffix("") / "index.html").read_text()
        if doc != "index.md"
        else (site / "index.html").read_text()
    )


@pytest.mark.tier("integration")
def test_readme_is_a_front_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 250 and len(text.encode()) <= 16 * 1024
    dated = DATED.findall(text)
    assert not dated, f"README carries dated text (it belongs on the site's benchmarks pages): {dated}"


def test_the_date_check_sees_what_the_old_readme_wrote():
    for line in (
        "measured 27 Nov 2026, see below",
        "26 Nov 2026 09:24–09:37 UTC",
        "(2026-11-25 17:03 UTC)",
        "issue 44's goal",
        "Nov 2026",
    ):
        assert DATED.search(line), line
    assert not DATED.search("Table 4: 25.28 vs 24.39 at 30M; ZeRO 0-3; 2-00:00:00")


def test_readme_sends_each_job_to_its_guide():
    text = README.read_text()
    for command, guide in JOBS.items():
        start = re.search(rf"```bash\n{command}\b", text)
        assert start, f"README shows no `{command}` command"
        section = text[start.start() :]
        section = section[: section.find("\n### ")] if "\n### " in section else section[: section.find("\n## ")]
        assert f"]({guide})" in section, f"README's `{command}` job does not link to {guide}"
        assert command in (ROOT / guide).read_text(), f"{guide} never shows `{command}`"


@pytest.mark.tier("integration")
def test_readme_links_and_anchors_resolve(site):
    links = LINK.findall(README.read_text())
    assert len(links) >= 10
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        path, _, anchor = link.partition("#")
        assert (ROOT / path).exists(), f"README links to {path}, which does not exist"
        if anchor:
            assert path.startswith("docs/") and path.endswith(".md"), link
            built = _page(site, path.removeprefix("docs/"))
            assert f'id="{anchor}"' in built, f"README links to #{anchor}, which {path} does not have"


@pytest.mark.tier("integration")
def test_every_page_is_on_the_site(site):
    """Every page under docs/ is in mkdocs.yml's navigation (strict mode warns about the others) and was built."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]

    def pages(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from pages(item)
        elif isinstance(node, dict):
            for value in node.values():
                yield from pages(value)

    listed = set(pages(nav))
    on_disk = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk <= listed and listed - on_disk == {docs_reference.CONFIG_PAGE, docs_reference.CLI_PAGE}
    for doc in listed:
        assert _page(site, doc)


@pytest.mark.tier("integration")
def test_a_broken_link_fails_the_strict_build(tmp_path):
    """The same configuration on a copy of docs/ with one link to a page that does not exist: the build fails and
    names it, so `make test` catches a broken link."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    with open(tmp_path / "docs" / "guides" / "claims.md", "a") as f:
        f.write("\nSee [the missing page](../no-such-page.md).\n")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config.update(
        docs_dir=str(tmp_path / "docs"),
        hooks=[str(ROOT / "tools" / "docs_reference.py")],
        watch=[str(ROOT / path) for path in config.get("watch", [])],
    )
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    done = _mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no-such-page.md" in done.stdout + done.stderr


def _escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|").replace("*", "\\*")


def _text(page: str) -> str:
    """The words of a built page: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


@pytest.mark.tier("integration")
def test_the_config_reference_has_every_key(site):
    rows = {
        line.split(" | ")[0].strip("| `"): line
        for line in docs_reference.config_reference().splitlines()
        if line.startswith("| `")
    }
    assert set(rows) == {k.name for k in schema.KEYS}
    for key in schema.KEYS:
        row = rows[key.name]
        assert _escaped(key.help) in row and _escaped(key.describe_type()) in row, row
        default = (
            "*base*"
            if key.default is schema.FROM_BASE and key.scope == "train"
            else "*config*"
            if key.default is schema.FROM_BASE
            else f"`{repr(key.default)}`"
        )
        assert f"| {default} |" in row, row
    built = _page(site, docs_reference.CONFIG_PAGE)
    words = _text(built)
    missing = [
        k.name for k in schema.KEYS if f"<code>{k.name}</code>" not in built or k.help.replace("`", "") not in words
    ]
    assert not missing, f"keys missing from the built configuration reference: {missing}"


def _commands(parser: argparse.ArgumentParser, prog: str = "depthbench"):
    """(prog, parser) of every command and subcommand, walked from the parsers (not from the generator)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prog} {name}", sub
                yield from _commands(sub, f"{prog} {name}")


@pytest.mark.tier("integration")
def test_the_cli_reference_has_every_command_and_option(site):
    page = docs_reference.cli_reference()
    sections = dict(re.findall(r"^#+ `(depthbench[^`]*)`\n(.*?)(?=^#+ `depthbench|\Z)", page, re.M | re.S))
    commands = list(_commands(build_parser()))
    assert len(commands) >= 16 and {prog for prog, _ in commands} == set(sections)
    for prog, parser in commands:
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            names = action.option_strings or (
                [] if isinstance(action, argparse._SubParsersAction) else [action.metavar or action.dest]
            )
            for name in names:
                shown = re.escape(name.replace("|", "\\|"))  # a pipe is escaped inside a table
                assert re.search(rf"`{shown}[ ,`]", sections[prog]), f"{prog}: {name} missing"
            if action.help and not isinstance(action, argparse._SubParsersAction):
                assert _escaped(action.help) in sections[prog], f"{prog}: help of {names} missing"
    built = _text(_page(site, docs_reference.CLI_PAGE))
    assert all(prog in built for prog, _ in commands)
