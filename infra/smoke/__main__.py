"""``python -m infra.smoke``: see ``infra.smoke.cli``."""

import sys

from infra.smoke.cli import main

sys.exit(main())
