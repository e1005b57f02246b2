"""Text embedders for the shared vector memory, all offline.

Two embedders share one small protocol so the memory (``workbench.stores.vector``)
never knows which model made its vectors:

- ``lexical`` (the default): hashed word and character features, numpy only. Cheap,
  dependency-free and good enough to make the retrieval mechanism observable.
- ``minilm``: the real sentence-transformers/all-MiniLM-L6-v2, run as a numpy forward
  pass over the weights that a registry package ships (no torch). Optional extra.

The embedder's ``name`` is recorded with every run, so results made with different
embedders are never pooled by accident.
"""
from __future__ import annotations

from functools import cache
from typing import Protocol, runtime_checkable

import numpy as np

from workbench.embeddings.errors import INSTALL_HINT, EmbedderUnavailable  # re-exported
from workbench.errors import InputError


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors; the same text always gives the same vector."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Shape ``(len(texts), dim)``, each row L2-normalised (float32 or float64)."""
        ...


KNOWN_EMBEDDERS: tuple[str, ...] = ("lexical", "minilm")


def get_embedder(name: str = "lexical") -> Embedder:
    """The named embedder, built once per process (the MiniLM weights are 90 MB).

    Raises ``ValueError`` for an unknown name and ``EmbedderUnavailable`` when the
    model's files are not installed (a failure is not cached: installing then retrying works).
    """
    if name not in KNOWN_EMBEDDERS:
        raise InputError(f"unknown embedder {name!r}; known embedders: {', '.join(KNOWN_EMBEDDERS)}")
    return _build(name)


@cache
def _build(name: str) -> Embedder:
    if name == "lexical":
        from workbench.embeddings.lexical import LexicalEmbedder

        return LexicalEmbedder()
    if name == "minilm":
        from workbench.embeddings.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    raise AssertionError(name)


__all__ = ["Embedder", "EmbedderUnavailable", "INSTALL_HINT", "KNOWN_EMBEDDERS", "get_embedder"]
