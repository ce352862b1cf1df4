import sys

from recstack.cli import main

sys.exit(main())
