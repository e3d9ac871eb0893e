"""Models of the transnext paper (being written)."""
