"""Pydantic models of the sympozium.ai/v1alpha1 resources, and resolving a run against its Agent."""
