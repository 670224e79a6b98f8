import sys

from prisma_core.cli import main

sys.exit(main())
