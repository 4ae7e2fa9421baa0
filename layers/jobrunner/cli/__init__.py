"""The ``jobrunner`` command line (``pyproject``: ``jobrunner = "jobrunner.cli:main"``)."""

from jobrunner.cli.app import app, main

__all__ = ["app", "main"]
