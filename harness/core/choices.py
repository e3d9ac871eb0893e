"""Names the command line offers (argparse choices and help), apart from the code behind them: a command's parser
reads them here without importing torch (``depthbench --help``), and the module that implements each imports it
from here. (``depthbench bench``'s options and presets: harness/measure/presets.py.)"""

import difflib


# depthbench eval --dataset: the evaluation protocols of harness/tasks/protocols.py
PROTOCOLS = ("val", "imagenet-a", "imagenet-r", "imagenet-sketch", "imagenet-v2", "imagenet-real", "imagenet-c")
# the five papers' model families, one file each under models/ (depthbench models --family, submit, jobs)
FAMILIES = ["stepsnet", "sret", "transnext", "horesnet", "scalenet"]
# depthbench submit --warning: the fewest seconds between Slurm's USR1 and the time limit (slurm/submit.py)
MIN_WARNING_S = 60  # a checkpoint needs time; Lightning/submitit use 90 s


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
