"""``python -m agent.cli``: the ``topolink`` command."""

import sys

from . import main

sys.exit(main())
