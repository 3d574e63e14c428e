"""``python -m grader`` is the ``grader`` command."""

import sys

from .cli import main

sys.exit(main())
