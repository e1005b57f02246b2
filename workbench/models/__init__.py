"""How an agent reaches a model: one async interface, several implementations."""
from workbench.models.base import ModelClient, ModelReply, ModelRequest

__all__ = ["ModelClient", "ModelReply", "ModelRequest"]
