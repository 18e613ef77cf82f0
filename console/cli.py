"""`ascend-console` entry point (the Textual console is built in a later step)."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    print("ascend-console: the console is not built yet; use `ascend-doctor npu`.",
          file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
