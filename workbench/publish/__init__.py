"""Publishing: the Jupyter kernel, papermill execution of the notebooks, batch
runs, and self-contained offline HTML reports."""
