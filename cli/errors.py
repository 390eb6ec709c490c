"""The one error the CLI's commands raise for a failure the user must read: `agentrun: <message>`, exit 1.

cli/main.py maps it, and the typed failures of the layers below (Kubernetes, the API, a kubeconfig), to one line on
stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations


class CliError(Exception):
    """A message for the user."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
