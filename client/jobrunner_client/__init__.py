"""The Distributed Job Runner's clients: the ``jobrunner`` command line (``cli``) and the worker SDK (``worker``),
installed without the server (``pip install ./client``). ``protocol`` is what they and the server agree on.

Imports nothing: the Lambda layer ships this package with ``protocol`` alone.
"""
