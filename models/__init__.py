"""depthbench's models: one file per paper, each registering its variants with timm.

``import models`` is all it takes: afterwards ``timm.create_model("steps_deit_small")`` (or any other
registered name; ``depthbench models`` lists them) works. Pure PyTorch + timm; no training or OpenMMLab code.
"""

from . import horesnet, scalenet, sret, stepsnet, transnext  # noqa: F401  (registration side effects)
