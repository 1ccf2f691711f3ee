import sys

from gradcert.cli.main import main

sys.exit(main())
