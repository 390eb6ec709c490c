"""tests/localkube package."""
