"""``python -m devstack.servers``: see ``devstack.servers.cli``."""

import sys

from devstack.servers.cli import main

sys.exit(main())
