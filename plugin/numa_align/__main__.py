"""`python -m numa_align` runs the `numa-align` command."""

import sys

from numa_align.cli import main

sys.exit(main())
