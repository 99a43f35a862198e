"""Code-mode stubs: typed Python API text generated from the operation catalog."""
