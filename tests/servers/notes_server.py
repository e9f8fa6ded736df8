"""A small MCP server written with the official Python SDK (`MCPServer`), run over stdio.

    python tests/servers/notes_server.py           (stdio)
    python tests/servers/notes_server.py --http    (Streamable HTTP on a free port of 127.0.0.1)
    python tests/servers/notes_server.py --sse     (legacy HTTP+SSE, the same)

It is a test peer: every feature the recorder/replayer must carry is exercised by one tool,
resource or prompt, and every answer is deterministic (no clocks, no randomness), so a flow
against it returns the same value on every run.

- `add_note(title, text)`  structured output (`structuredContent` + `outputSchema`)
- `count(n)`               n `notifications/progress` for the call's progressToken
- `slow(seconds)`          reports one progress step, then sleeps: the target of cancellation tests
- `ask_model(question)`    asks the client's LLM (`sampling/createMessage` on a 2025 session; an
                           `input_required` result and a retry on a 2026-07-28 session)
- `list_client_roots()`    asks the client for its roots (`roots/list`, same two spellings)
- `touch()`                (--http only) sends `notifications/resources/list_changed`, tied to no
                           request: it goes on the session's standalone GET stream
- resource `notes://index` the titles of the notes added so far (JSON)
- prompt `summarize(topic)`

Nothing but protocol messages is written to stdout (the SDK's stdio transport owns it; logging
goes to stderr).
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, ListRoots, MCPServer, Sample
from mcp.server.mcpserver.resolve import Resolve
from mcp.types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent
from pydantic import BaseModel

server = MCPServer(
    name="notes",
    version="1.0.0",
    instructions="A tiny notes server used by the mcp-tapes tests.",
    log_level="WARNING",
)

_notes: dict[str, str] = {}


class Note(BaseModel):
    """What `add_note` returns: the note as stored, and how many notes there are now."""

    id: int
    title: str
    text: str
    total: int


@server.tool(description="Store a note and return it as structured output.")
def add_note(title: str, text: str) -> Note:
    _notes[title] = text
    return Note(id=list(_notes).index(title) + 1, title=title, text=text, total=len(_notes))


@server.tool(description="Count to n, reporting progress at every step.")
async def count(n: int, ctx: Context) -> str:
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i}/{n}")
    return f"counted to {n}"


@server.tool(description="Report one progress step, then sleep for the given seconds (cancellation target).")
async def slow(seconds: float, ctx: Context) -> str:
    await ctx.report_progress(0, seconds, "started")
    await anyio.sleep(seconds)
    return f"slept {seconds}s"


def _sample_question(question: str) -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=question))],
        max_tokens=64,
        system_prompt="You answer questions about notes.",
    )


@server.tool(description="Ask the client's model a question (sampling) and return its answer.")
def ask_model(question: str, answer: Annotated[CreateMessageResult, Resolve(_sample_question)]) -> str:
    content = answer.content
    text = content.text if isinstance(content, TextContent) else repr(content)
    return f"model {answer.model} says: {text}"


def _ask_roots() -> ListRoots:
    return ListRoots()


@server.tool(description="Ask the client for its roots and return their URIs, sorted.")
def list_client_roots(roots: Annotated[ListRootsResult, Resolve(_ask_roots)]) -> str:
    return "\n".join(sorted(f"{root.uri} ({root.name})" for root in roots.roots)) or "no roots"


async def touch(ctx: Context) -> str:
    """Tell the client that the resource list changed (a notification tied to no request)."""
    await ctx.session.send_resource_list_changed()
    return "touched"


@server.resource("notes://index", name="index", description="Titles of all notes", mime_type="application/json")
def index() -> str:
    return json.dumps({"titles": sorted(_notes)})


@server.prompt(description="Ask for a summary of the notes about a topic.")
def summarize(topic: str) -> str:
    return f"Summarize my notes about {topic}."


if __name__ == "__main__":
    if sys.argv[1:] in (["--http"], ["--sse"]):  # on a free port, announced on stderr
        from serving import serve

        server.tool()(touch)  # over HTTP only: the committed stdio cassettes list the tools without it
        if sys.argv[1] == "--http":
            serve(server.streamable_http_app(), "notes server")
        else:
            serve(server.sse_app(), "notes server", path="/sse")
    else:
        server.run("stdio")
