"""End-to-end tests: localkube + Temporal dev server + worker + bridge."""
