"""localkube: a local, wire-compatible Kubernetes API server and kubelet for development and tests."""
