"""Models of the sret paper (being written)."""
