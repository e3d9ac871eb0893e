"""The training engine: backends (Accelerate, DeepSpeed), the loop, checkpoints, loaders, builders, and the task
interface (tasks.py) through which the data-specific parts plug in. Depends on harness/core only."""
