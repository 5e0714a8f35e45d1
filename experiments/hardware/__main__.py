"""Entry point of `python -m experiments.hardware`."""

import sys

from experiments.hardware.cli import main

sys.exit(main())
