"""Tests of the reference agent container program (``python -m agentrunner``)."""
