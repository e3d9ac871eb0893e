"""Models of the stepsnet paper (being written)."""
