"""Names the command line offers (argparse choices and help), apart from the code behind them: a command's parser
reads them here without importing torch (``depthbench --help``), and the module that implements each imports it
from here. (``depthbench bench``'s options and presets: harness/measure/presets.py.)"""

# depthbench eval --dataset: the evaluation protocols of harness/tasks/protocols.py
PROTOCOLS = ("val", "imagenet-a", "imagenet-r", "imagenet-sketch", "imagenet-v2", "imagenet-real", "imagenet-c")
# the five papers' model families, one file each under models/ (depthbench models --family, submit, jobs)
FAMILIES = ["stepsnet", "sret", "transnext", "horesnet", "scalenet"]
# depthbench submit --warning: the fewest seconds between Slurm's USR1 and the time limit (slurm/submit.py)
MIN_WARNING_S = 60     # a checkpoint needs time; Lightning/submitit use 90 s
