"""Metrics: pure functions from records to rows. Nothing here touches a live
world, store or model; everything can be recomputed from a run directory."""
