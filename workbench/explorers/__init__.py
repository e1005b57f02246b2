"""The explorers: one world of a kind, run or replayed step by step in a notebook.

They sit a layer above the study runner (they re-run one world with it and read its
params), so they live here and not inside the kinds, which the runner imports: a
kind never imports the runner, and nothing below this package imports an explorer.
Each module is one kind's explorer, named as the kind; no explorer imports another.
"""
