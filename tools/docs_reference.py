"""The site's two generated pages (docs/, `mkdocs build`): the configuration reference from the schema
(harness/core/schema.py ``KEYS``) and the command-line reference from the argparse parsers (harness/cli.py
``build_parser``). Generated at build time by the mkdocs hook below, never committed, so neither can drift from
the code. Written by hand because neither source is something a plugin reads: the schema is our own table, and
the argparse plugins (mkdocs-click is for click; sphinx-argparse is Sphinx's) do not run under mkdocs, while
argparse's own parser objects already hold every option, default and help.

The hook (``hooks: [tools/docs_reference.py]`` in mkdocs.yml) adds reference/config.md and reference/cli.md to the
site's files; ``python tools/docs_reference.py OUT`` writes the two pages to OUT to read them without a build.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # mkdocs loads this file by path; the packages live in the checkout
    sys.path.insert(0, str(ROOT))

from harness.cli import build_parser  # noqa: E402 -- after the checkout is on the path
from harness.core import schema  # noqa: E402

CONFIG_PAGE = "reference/config.md"
CLI_PAGE = "reference/cli.md"


def _cell(text: object) -> str:
    """Prose inside a Markdown table cell: one line, pipes and ``*`` escaped, ``<run-id>`` shown, not read as HTML;
    backticks stay code."""
    return (
        str(text)
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("|", "\\|")
        .replace("*", "\\*")
        .replace("\n", " ")
    )


def _code(text: object) -> str:
    """Code inside a Markdown table cell (entities are not decoded there: only the pipe is escaped)."""
    text = str(text).replace("|", "\\|").replace("\n", " ")
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


def config_reference() -> str:
    """Every key of the schema: name, default, type and range, help; the training keys, then the MMEngine ones."""
    out = [
        "# Configuration reference",
        "",
        "Generated from `harness/core/schema.py` when the site is built: every key a config takes, its default, "
        "type and range, and what it does (the same table `depthbench train --help-config` prints). Set a key "
        "with `key=value` after the config on the command line; `+model.KEY=value` adds a model argument. How "
        "the schema is used and what is refused: [Training configs](../config.md).",
        "",
    ]
    scopes = (
        (
            "train",
            "Training configs (`depthbench train`, `eval`, `preflight`, `submit`)",
            "*base*: set by the dataset or schedule base (`configs/_base_/datasets/`, `configs/_base_/schedules/`).",
        ),
        (
            "finetune",
            "MMEngine configs (`depthbench finetune`, `test`)",
            "*config*: the config's own value (stock MMDetection/MMSegmentation files).",
        ),
    )
    for scope, title, note in scopes:
        out += [f"## {title}", "", note, "", "| key | default | type and range | help |", "|---|---|---|---|"]
        for key in (k for k in schema.KEYS if k.scope == scope):
            default = (
                ("*base*" if scope == "train" else "*config*")
                if key.default is schema.FROM_BASE
                else _code(repr(key.default))
            )
            out.append(f"| {_code(key.name)} | {default} | {_cell(key.describe_type())} | {_cell(key.help)} |")
        out.append("")
    return "\n".join(out)


def _subcommands(parser: argparse.ArgumentParser):
    """(name, parser, help) of each subcommand of ``parser``, in the order they were added."""
    for action in parser._actions:  # argparse offers no public walk over its subparsers
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, sub, helps.get(name, "")


def _option_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = parser._get_formatter()._format_action_invocation(action)  # as --help writes it: -o OUT, --out OUT
        default = (
            "" if action.default in (None, argparse.SUPPRESS, False) or action.nargs == 0 else _code(action.default)
        )
        choices = f" (one of {', '.join(map(str, action.choices))})" if action.choices else ""
        rows.append(f"| {_code(name)} | {default} | {_cell((action.help or '') + choices)} |")
    return rows


def _command_section(prog: str, parser: argparse.ArgumentParser, help_text: str, level: int) -> list[str]:
    out = [f"{'#' * level} `{prog}`", ""]
    if help_text:
        out += [help_text[0].upper() + help_text[1:] + ".", ""]
    out += ["```text", parser.format_usage().strip(), "```", ""]
    rows = _option_rows(parser)
    if rows:
        out += ["| argument or option | default | help |", "|---|---|---|", *rows, ""]
    for name, sub, sub_help in _subcommands(parser):
        out += _command_section(f"{prog} {name}", sub, sub_help, level + 1)
    return out


def cli_reference() -> str:
    """Every command and option of ``depthbench``, from the parsers themselves."""
    parser = build_parser()
    out = [
        "# Command-line reference",
        "",
        "Generated from the argparse parsers (`harness/cli.py`, `harness/commands/`) when the site is built: "
        "every command, argument and option with its default and help, as `depthbench COMMAND --help` prints "
        "them. Every command is also a Python function of `harness.api` with the same arguments.",
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
    ]
    for name, sub, help_text in _subcommands(parser):
        out += _command_section(f"depthbench {name}", sub, help_text, 2)
    return "\n".join(out)


PAGES = {CONFIG_PAGE: config_reference, CLI_PAGE: cli_reference}


def on_files(files, config):
    """mkdocs hook: add the generated pages to the site (mkdocs >= 1.6's ``File.generated``)."""
    from mkdocs.structure.files import File  # lazy: only mkdocs loads this hook; the tests render without it

    for path, render in PAGES.items():
        files.append(File.generated(config, path, content=render()))
    return files


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "site-reference")
    for path, render in PAGES.items():
        (target / path).parent.mkdir(parents=True, exist_ok=True)
        (target / path).write_text(render())
        print(target / path)
