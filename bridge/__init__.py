"""bridge package."""
