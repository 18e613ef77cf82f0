"""`python -m checks.cli`: `ascend-doctor` itself."""

import sys

from checks.cli import main

sys.exit(main())
