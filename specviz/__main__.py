import sys

from specviz.tools.cli import main

sys.exit(main())
