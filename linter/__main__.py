import sys

from modellint.cli import main

sys.exit(main())
