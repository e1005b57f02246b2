"""``workbench view``: every world of one or more run sets in a browser, offline.

Static first: :func:`~workbench.viewer.bundle.write_bundle` writes an index page
(one row per world, sortable, filterable, searchable; per-cell usage; the
matched-cell comparison of ``workbench compare`` when several run sets are
given) and world pages, as plain files that work from ``file://``;
:func:`~workbench.viewer.server.serve` serves the same files from 127.0.0.1 with
stdlib ``http.server`` and renders any world's page on demand. No framework, no
CDN: the table is a small script of our own, figures use the plotly.js that the
plotly package ships, written once beside the pages.

World pages are drawn by each kind's own view functions (the report's), reached
through the kind's ``world_page`` hook (:class:`~workbench.kinds.base.WorldKind`),
so the viewer names no kind and a kind defined elsewhere brings its own page.
"""
