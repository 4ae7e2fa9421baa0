"""The fault suite: prove on real servers that faults lose no execution (``make chaos``)."""
