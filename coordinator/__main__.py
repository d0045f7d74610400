import sys

from coordinator.cli.main import main

sys.exit(main())
