"""``python -m tests.urns``: rewrite tests/urns/<stack>.txt from what the program registers today."""

import sys

from tests.urns import main

sys.exit(main())
