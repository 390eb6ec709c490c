"""The HTTP API in-process (FastAPI TestClient) against the real localkube."""
