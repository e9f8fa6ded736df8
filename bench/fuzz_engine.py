"""The engine's property test at scale: tests/unit/replay/test_engine_fuzz.py (a few hundred examples in the
suite) run with 100 000 generated examples: JSON-RPC-shaped messages with odd ids, params and
tokens, batches, deep nesting and bytes that are not JSON, into the engine of every committed
cassette. It passes when no example raises. Not a timing: it prints how long the run took.

    python bench/fuzz_engine.py [EXAMPLES]     (default 100000; about an hour on a 2-core machine)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    examples = sys.argv[1] if len(sys.argv) > 1 else "100000"
    started = time.monotonic()
    code = subprocess.call(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--hypothesis-show-statistics",
         str(ROOT / "tests" / "unit" / "replay" / "test_engine_fuzz.py")],
        env={**os.environ, "TAPES_FUZZ_EXAMPLES": examples}, cwd=ROOT,
    )
    print(f"{examples} examples: {'no exception' if code == 0 else 'FAILED'} in {time.monotonic() - started:.0f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
