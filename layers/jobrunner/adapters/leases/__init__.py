"""Implementations of one port; see jobrunner.ports."""
