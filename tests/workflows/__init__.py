"""Workflow tests that need no cluster: replay of recorded histories."""
