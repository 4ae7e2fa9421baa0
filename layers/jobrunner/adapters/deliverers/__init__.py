"""Implementations of the ``Deliverer`` port (``jobrunner.ports.delivering``): one module per kind of target,
``routing`` sending each call to the one of its kind, ``memory`` for tests."""
