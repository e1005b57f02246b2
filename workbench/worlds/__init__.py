"""The shipped world kinds, one package each (``stigmergy``, ``recall``, ``collusion``).

Nothing here is shared: a kind imports the engine's layers (stores, models,
records, :mod:`workbench.kinds` for its interface) and never another kind; the
registry that finds them by name is :mod:`workbench.kinds`.
"""
