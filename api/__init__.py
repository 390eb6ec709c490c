"""The HTTP API: runs, gate verdicts, probes, and the dashboard."""
