"""Entry point for ``python -m agentrunner``, the agent container's command."""

from __future__ import annotations

from agentrunner.runner import main

if __name__ == "__main__":
    raise SystemExit(main())
