"""Task data authored for this project (no copied task data)."""
