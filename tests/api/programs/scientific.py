"""Scientific machine learning: physics-informed networks, neural ODEs, spectral operators, EM, kernel methods, optimal transport."""

from __future__ import annotations
