"""`python -m lazytensor_train` runs the same command line as `lazytensor`."""
import sys

from .cli import main

sys.exit(main())
