"""The ``jobrunner`` subcommands, one module per group; ``cli.app`` registers them."""
