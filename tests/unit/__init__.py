"""Sans-IO tests: no subprocess, no socket, no server; `python -m pytest tests/unit -q` runs in seconds."""
