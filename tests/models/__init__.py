"""Tests of the CRD models."""
