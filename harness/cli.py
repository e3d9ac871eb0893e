"""``depthbench``: the one command line of depthbench.

Each command lives in ``harness/commands/<module>.py`` with ``add_parser(subparsers)``, ``main(args)`` and a typed
``run(...)`` (the Python API, :mod:`harness.api`); this file only collects them. The command modules import
nothing heavy at their top, so ``depthbench --help`` and a mistyped option answer at once (no torch is imported
before a command runs). Bad input of any command ends here: one line, its exit code.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
import warnings

from harness.core.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, DepthbenchError
from harness.core.stdout_logs import library_logs_to_stderr

# the command modules (under harness/commands/), in the order `depthbench --help` lists their commands
COMMANDS = [
    "demo",
    "env",
    "models",
    "verify",
    "bench",
    "train",
    "eval",
    "export",
    "finetune",
    "diagnose",
    "results",
    "claims",
    "preflight",
    "submit",
    "jobs",
    "data",
]


class UsageError(DepthbenchError):
    """argparse's complaint about the command line (an invalid choice, a missing or unknown argument), raised as
    the one error type instead of printed with the usage; ``prog`` is the command line it concerns
    (``depthbench``, ``depthbench train``), as argparse names it."""

    def __init__(self, message: str, prog: str):
        super().__init__(message)
        self.prog = prog


class Parser(argparse.ArgumentParser):
    """argparse's parser whose errors reach :func:`main`'s one error path (the command's subparsers are of the
    same class: argparse makes them with the parent's)."""

    def error(self, message: str):
        raise UsageError(f"{message} ({self.prog} --help lists the options)", self.prog)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="depthbench",
        description="Reproduce and benchmark StepsNet, SReT, TransNeXt, HO-ResNet and ScaleNet.",
        epilog="Config keys are overridden as key=value after the config, e.g. depthbench train CONFIG epochs=10 "
        "optim.lr=1e-3 (every key, its default and range: depthbench train --help-config). "
        "depthbench COMMAND --help for a command's options. "
        "Documentation: docs/ in the checkout (make docs builds the docs site; start with docs/training.md).",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"harness.commands.{name}").add_parser(subparsers)
    parser.commands = list(subparsers.choices)  # every command name, for did-you-mean
    return parser


def unknown_command(parser, argv) -> str | None:
    """``depthbench trian``: one line with the closest command (argparse lists all of them, suggesting none)."""
    name = next((a for a in argv if not a.startswith("-")), None)
    if name is None or name in parser.commands:
        return None
    close = difflib.get_close_matches(name, parser.commands, n=1, cutoff=0.6)
    return (
        f"unknown command {name!r}"
        + (f"; did you mean depthbench {close[0]}?" if close else "")
        + " (depthbench --help lists the commands)"
    )


def option_for_a_key(command: str, extra: list[str]) -> str | None:
    """``depthbench train CONFIG --epochs 1``: an unknown option where a config key was meant; the line saying how
    to write it (key=value), else None."""
    for i, arg in enumerate(extra):
        if arg.startswith("--"):
            key, sep, value = arg[2:].partition("=")
            if not sep and i + 1 < len(extra) and not extra[i + 1].startswith("-"):
                value = extra[i + 1]
            written = f"{key.replace('-', '_')}={value or 'VALUE'}"
            return (
                f"{arg} is not an option of {command}; config keys are key=value: write {written} "
                f"(depthbench {command} --help lists the options)"
            )
    return None


# our packages: their warnings are meant for the user; everyone else's (deprecations inside mmengine, mmseg,
# pkg_resources, torch) would bury the one line a command prints, so they stay off the console unless asked for
OWN_MODULES = ("harness", "models", "downstream", "results", "slurm", "__main__")


def quiet_library_warnings() -> None:
    """Library warnings off the console (``DEPTHBENCH_VERBOSE=1`` brings them back); MMEngine's runs still write
    their full log, warnings included, into the run directory."""
    if not os.environ.get("DEPTHBENCH_VERBOSE"):
        warnings.filterwarnings("ignore", module=rf"(?!(?:{'|'.join(OWN_MODULES)})(?:\.|$))")


def main(argv: list[str] | None = None) -> int:
    # DeepSpeed probes for an accelerator when mmengine/accelerate import it; on a CPU machine say so up front.
    os.environ.setdefault("DS_ACCELERATOR", "cpu" if not _has_cuda_device() else "cuda")
    quiet_library_warnings()
    library_logs_to_stderr()
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    prog = f"depthbench {command}" if command in parser.commands else "depthbench"
    try:  # parsing too: every bad input -- argparse's, a command's --help-config, the command's own -- ends here
        if problem := unknown_command(parser, argv):
            raise UsageError(problem, "depthbench")
        args, extra = parser.parse_known_args(argv)
        if extra:  # `key=value` overrides may also follow the options (train/eval)
            if hasattr(args, "overrides") and (problem := option_for_a_key(args.command, extra)):
                raise UsageError(problem, prog)
            if not hasattr(args, "overrides") or any(a.startswith("-") or "=" not in a for a in extra):
                raise UsageError(
                    f"unrecognized arguments: {' '.join(extra)} ({prog} --help lists the options)", "depthbench"
                )
            args.overrides += extra
        if not getattr(args, "func", None):
            parser.print_help()
            return EXIT_BAD_INPUT
        return int(args.func(args) or 0)
    except DepthbenchError as e:  # the one place bad input becomes one line and an exit code
        print(f"{getattr(e, 'prog', prog)}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("depthbench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `depthbench models | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _has_cuda_device() -> bool:
    return os.path.exists("/dev/nvidiactl") or bool(os.environ.get("CUDA_VISIBLE_DEVICES"))


if __name__ == "__main__":
    sys.exit(main())
