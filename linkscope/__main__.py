"""`python -m linkscope` runs the command line."""

import sys

from linkscope.cli import main

sys.exit(main())
