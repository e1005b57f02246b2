"""Shared state that agents act on. Stores know nothing about models or worlds."""
from workbench.stores.kv import Entry, KVStore

__all__ = ["Entry", "KVStore"]
