"""`python -m spark_watchd`."""

import sys

from spark_watchd.cli import main

sys.exit(main())
