"""Models of the horesnet paper (being written)."""
