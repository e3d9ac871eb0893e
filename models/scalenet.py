"""Models of the scalenet paper (being written)."""
