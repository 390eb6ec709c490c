"""The Temporal worker process."""
