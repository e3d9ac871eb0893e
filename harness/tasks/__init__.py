"""The built-in tasks (harness/engine/tasks.py): image classification, language modelling, instruction tuning.

The engine imports this package and calls :func:`register` on first use. A new task is a module here with a
:class:`harness.engine.tasks.Task` subclass, registered below.
"""

from harness.engine.tasks import register_task
from harness.tasks.alpaca import InstructionTask
from harness.tasks.image import ImageTask
from harness.tasks.lm import LanguageModelTask


def register() -> None:
    for task in (ImageTask(), LanguageModelTask(), InstructionTask()):
        register_task(task)
