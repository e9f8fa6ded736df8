"""What the tests share: paths and peers (paths.py), message and recording builders (messages.py,
recordings.py), peer processes (processes.py), SDK client flows (flows.py), HTTP peers and clients
(http_peers.py), the scripted stdio peers (recorder_peer.py, recorder_tee.py) and the scripts that
re-record the committed cassettes (make_*.py). Test modules import from here, never from each other."""
