"""mucode."""
