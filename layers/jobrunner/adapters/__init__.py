"""Implementations of ``jobrunner.ports``: one package per port, one module per backend."""
