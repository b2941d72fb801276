"""``python -m lcpo``: the ``lcpo`` command (:func:`lcpo.cli.main.main`), for environments where the console script
is not on ``PATH``."""

import sys

from lcpo.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
