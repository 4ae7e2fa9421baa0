"""Use cases. Pure: they talk to the world only through ``jobrunner.ports``."""
