"""Where the configs live and which config a data file may name -- without MMEngine, so that what only reads data
files (``depthbench claims --status``: results/claims_status.py, results/paper_tables.py) does not load it.
:mod:`harness.core.config` re-exports all of it."""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
CONFIGS_DIR = REPO / "configs"
CONFIG_RULE = (
    "a data file names a config by its repository path inside configs/ (e.g. configs/deit/x.py): relative, "
    "no '..', not a link out of configs/; configs elsewhere run only when named on the command line"
)


def config_named_by(name, source, error: type[ConfigError] | type = ConfigError) -> str:
    """The config that a data file (``source``: a paper table, a claims file) names, checked to lie inside this
    repository's ``configs/``: data never names code to run (MMEngine configs are Python). ``name`` is the config's
    path in the repository (``configs/<paper>/...py``, as runs record ``config_file``); an absolute path, a ``..``
    or a link that resolves outside ``configs/`` is one line naming the file and the rule."""
    text = str(name) if isinstance(name, (str, Path)) else None
    parts = Path(text).parts if text else ()
    inside = (
        text
        and not Path(text).is_absolute()
        and ".." not in parts
        and len(parts) > 1
        and parts[0] == "configs"
        and text.endswith(".py")
        and "\\" not in text
        and not any(ord(c) < 32 for c in text)
    )
    if inside:
        try:  # links resolved: a link inside configs/ that points out of it names code outside
            (REPO / text).resolve().relative_to(CONFIGS_DIR.resolve())
        except (ValueError, OSError, RuntimeError):
            inside = False
    if not inside:
        raise error(f"{source}: config {name!r} is refused: {CONFIG_RULE}")
    return Path(text).as_posix()
