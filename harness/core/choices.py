"""Names the command line offers (argparse choices and help), apart from the code behind them: a command's parser
reads them here without importing torch (``depthbench --help``), and the module that implements each imports it
from here. (``depthbench bench``'s options and presets: harness/measure/presets.py.)"""

import difflib
from pathlib import Path

from harness.core.config_paths import REPO


# depthbench eval --dataset: the evaluation protocols of harness/tasks/protocols.py
PROTOCOLS = ("val", "imagenet-a", "imagenet-r", "imagenet-sketch", "imagenet-v2", "imagenet-real", "imagenet-c")
# the five papers' model families, one file each under models/ (depthbench models --family, submit, jobs)
FAMILIES = ["stepsnet", "sret", "transnext", "horesnet", "scalenet"]
# depthbench submit --warning: the fewest seconds between Slurm's USR1 and the time limit (slurm/submit.py)
MIN_WARNING_S = 60  # a checkpoint needs time; Lightning/submitit use 90 s
# depthbench results --format and --reduce (results/reporting.py)
RESULTS_FORMATS = ("md", "csv", "tex", "html")
RESULTS_REDUCE = ("best", "last", "mean")
# depthbench claims --out and submit --claims: where a claims run's runs and report go (the checkout's, from any
# directory, as the runs folder), and the seeds per arm `submit --claims` trains: the designs' first look
# (tests/results/test_claims.py)
CLAIMS_OUT = REPO / "results" / "claims"
CLAIMS_EFFICIENCY_OUT = REPO / "results" / "claims-efficiency"  # --efficiency's report: never mixed with the full run's
CLAIMS_PILOT_OUT = REPO / "results" / "claims-pilot"  # --pilot's runs and table: never an evaluated run's folder
CLAIMS_SEEDS = 5


def claims_out(quick: bool, efficiency: bool = False, scale: str = "reduced", pilot: bool = False) -> Path:
    """Where the runs and the report go without ``--out`` (``submit --claims`` trains into the same folders; at the
    paper's scale ``results/claims-paper``; ``--pilot``'s in ``results/claims-pilot``)."""
    base = (
        CLAIMS_PILOT_OUT
        if pilot
        else CLAIMS_EFFICIENCY_OUT
        if efficiency
        else Path(f"{CLAIMS_OUT}-paper")
        if scale == "paper"
        else CLAIMS_OUT
    )
    return Path(f"{base}-quick") if quick else base


def not_one_of(setting: str, value, choices) -> str:
    """The one message for a value outside its choices: ``data.type='imgfolder' is not one of ...; did you mean
    data.type=folder?`` (``setting``: how the user wrote the key, e.g. ``data.type`` or ``--dataset``)."""
    names = [str(c) for c in choices]
    close = difflib.get_close_matches(str(value), names, n=1, cutoff=0.6)
    glue = " " if setting.startswith("-") else "="
    shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:20]}...({len(repr(value))} characters)"
    return f"{setting}{glue}{shown} is not one of {', '.join(names)}" + (
        f"; did you mean {setting}{glue}{close[0]}?" if close else ""
    )
