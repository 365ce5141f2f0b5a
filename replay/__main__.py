"""``python -m inferensics.replay --pack DIR``: replay a pack with only torch and pydantic installed."""

import sys

from inferensics.replay._internal.executor import main

sys.exit(main())
