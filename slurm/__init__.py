"""sbatch templates and the submission code behind ``depthbench submit``, ``jobs`` and ``cancel``."""
