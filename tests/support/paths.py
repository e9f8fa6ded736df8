"""Where things are: the repository, the committed cassettes, the test servers, the npm peers, and
how to run the `tapes` command."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASSETTES = ROOT / "cassettes"
SERVERS = ROOT / "tests" / "servers"
SUPPORT = ROOT / "tests" / "support"
PEERS = ROOT / "tests" / "peers"
EVERYTHING_JS = PEERS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
TAPES = [sys.executable, "-m", "tapes"]
NOTES_SERVER = [sys.executable, str(SERVERS / "notes_server.py")]
RESUMABLE_SERVER = [sys.executable, str(SERVERS / "resumable_server.py")]
OAUTH_SERVER = [sys.executable, str(SERVERS / "oauth_server.py")]
FEED_SERVER = [sys.executable, str(SERVERS / "feed_server.py")]
CONFORMANCE_SERVER = [sys.executable, str(SERVERS / "conformance_server.py")]
# the official conformance suite and the Node.js (22) it needs, from tests/peers/conformance
CONFORMANCE = PEERS / "conformance" / "node_modules"
CONFORMANCE_SUITE = [str(CONFORMANCE / ".bin" / "node"), str(CONFORMANCE / "@modelcontextprotocol" / "conformance" / "dist" / "index.js")]
