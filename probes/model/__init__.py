"""The model wing of the probes: what a model directory is, read once, torch-free."""
