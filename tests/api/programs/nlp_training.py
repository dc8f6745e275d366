"""NLP training: vocabularies and batching, text classifiers, CRF taggers, sentence embeddings, schedulers and clipping."""

from __future__ import annotations
