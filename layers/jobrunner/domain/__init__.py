"""Pure domain: no I/O, no AWS, no drivers."""
