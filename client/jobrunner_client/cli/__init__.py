"""The ``jobrunner`` command line (``pyproject``: ``jobrunner = "jobrunner_client.cli:main"``)."""

from jobrunner_client.cli.app import app, main

__all__ = ["app", "main"]
