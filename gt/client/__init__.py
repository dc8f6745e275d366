"""Compatibility with the earlier GT prototype's import paths (``from gt.client import nn``)."""

from gt import nn, optim

__all__ = ["nn", "optim"]
