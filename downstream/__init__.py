"""Adapters between depthbench and MMDetection / MMSegmentation (through MMEngine's registries).

Importing the package registers what downstream configs need: ``DepthbenchRunner`` and the explicit
``weights_only`` checkpoint loading of :mod:`downstream.mmengine_compat`, the ``DepthbenchBackbone``
(:mod:`downstream.backbone`), the ``RunDirHook`` (:mod:`downstream.hooks`) and the embedded data sets'
``EmbeddedADE20KDataset`` (:mod:`downstream.embedded`).
"""

from . import mmengine_compat  # noqa: F401  (registrations)
from . import backbone, embedded, hooks  # noqa: F401,E402  (registrations)
