"""The notes server (tests/servers/notes_server.py --http) with one race of a loaded machine made
certain: the 400 it gives a GET that carries no session (a client opening its stream before it
initialized) reaches the client between the head and the body of the initialize answer.

The Python SDK stamps that 400 with the Mcp-Session-Id of a session it opened for the GET and
dropped at once; a client that takes the session ID of every answer goes on with the dropped one.

    python tests/servers/late_refusal_server.py    (Streamable HTTP on a free port of 127.0.0.1)
"""

from __future__ import annotations

import json
from typing import Any

import anyio

import notes_server
from serving import serve

HELD = 0.3  # seconds the initialize answer's body waits after its head: the late 400 goes out then

notes_server.server.tool()(notes_server.touch)  # as notes_server.py --http
app = notes_server.server.streamable_http_app()
initialize_answer_started = anyio.Event()


async def late_refusal(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return await app(scope, receive, send)
    if scope["method"] == "GET" and not any(name == b"mcp-session-id" for name, _ in scope["headers"]):
        held = []

        async def hold(message: Any) -> None:
            held.append(message)

        await app(scope, receive, hold)
        await initialize_answer_started.wait()
        for message in held:
            await send(message)
        return
    if scope["method"] == "POST":
        body = b""
        while True:  # read whole to tell an initialize, then handed on as it came
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        initializing = json.loads(body or b"{}").get("method") == "initialize" if body.startswith(b"{") else False
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def body_after_a_while(message: Any) -> None:
            if initializing and message["type"] == "http.response.body" and not initialize_answer_started.is_set():
                initialize_answer_started.set()
                await anyio.sleep(HELD)
            await send(message)

        return await app(scope, replay, body_after_a_while)
    return await app(scope, receive, send)


if __name__ == "__main__":
    serve(late_refusal, "late refusal server")
