"""The bridge: Kubernetes watches to Temporal starts, cancels and signals."""
