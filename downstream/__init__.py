"""Adapters between depthbench and MMDetection / MMSegmentation (through MMEngine's registries).

Importing the package registers what downstream configs need: ``DepthbenchRunner`` and the explicit
``weights_only`` checkpoint loading of :mod:`downstream.mmengine_compat`.
"""
from . import mmengine_compat  # noqa: F401  (registrations)
