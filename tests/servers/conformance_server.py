"""A server for the official MCP conformance suite's server scenarios (@modelcontextprotocol/conformance),
written with the official Python SDK (`MCPServer`), served over Streamable HTTP on 127.0.0.1: a test
peer (tests/e2e/test_conformance.py records the suite against it, then runs it against the replay).

    python tests/servers/conformance_server.py [--port N]    (a free port by default; the URL is printed on stderr)
    conformance server --url http://127.0.0.1:PORT/mcp

It has what the suite's scenarios ask for, under the names they use:

- tools: test_simple_text, test_image_content, test_audio_content, test_embedded_resource,
  test_multiple_content_types, test_tool_with_logging (3 info logs, 50 ms apart),
  test_tool_with_progress (0/100, 50/100, 100/100), test_error_handling (isError), test_sampling(prompt),
  test_elicitation(message), test_elicitation_sep1034_defaults, test_elicitation_sep1330_enums,
  json_schema_2020_12_tool (an inputSchema with $schema, $defs and additionalProperties: false)
- resources: test://static-text, test://static-binary, test://watched-resource, and the template
  test://template/{id}/data; resources/subscribe and resources/unsubscribe are accepted
- prompts: test_simple_prompt, test_prompt_with_arguments(arg1, arg2),
  test_prompt_with_embedded_resource(resourceUri), test_prompt_with_image
- completion/complete (a few values starting with what was typed), logging/setLevel
- resumability: an in-memory event store, and `retry` on the priming events
- DNS rebinding protection (the SDK's default for a server on 127.0.0.1)

Every answer is deterministic (no clocks, no randomness, the image and sound are built from constants),
so two runs of the suite against it exchange the same messages apart from session ids.
"""

from __future__ import annotations

import argparse
import base64
import io
import struct
import warnings
import wave
import zlib
from typing import Any

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.shared.exceptions import MCPDeprecationWarning

# the suite's 2025 scenarios log and sample, which the SDK warns are deprecated at 2026-07-28
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

server = MCPServer(name="conformance-python", version="1.0.0", log_level="WARNING")


# ---- fixed media ------------------------------------------------------------------------------


def _png_1x1_red() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte, then one red pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _wav_silence() -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x00" * 80)  # 10 ms of silence
    return out.getvalue()


PNG_B64 = base64.b64encode(_png_1x1_red()).decode()
WAV_B64 = base64.b64encode(_wav_silence()).decode()


# ---- tools ------------------------------------------------------------------------------------


@server.tool(description="Returns one text block.")
def test_simple_text() -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text="This is a simple text response for testing.")])


@server.tool(description="Returns one image block (a 1x1 red PNG).")
def test_image_content() -> types.CallToolResult:
    return types.CallToolResult(content=[types.ImageContent(type="image", data=PNG_B64, mime_type="image/png")])


@server.tool(description="Returns one audio block (10 ms of silence, WAV).")
def test_audio_content() -> types.CallToolResult:
    return types.CallToolResult(content=[types.AudioContent(type="audio", data=WAV_B64, mime_type="audio/wav")])


def _embedded(uri: str, mime_type: str, text: str) -> types.EmbeddedResource:
    return types.EmbeddedResource(
        type="resource", resource=types.TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    )


@server.tool(description="Returns one embedded text resource.")
def test_embedded_resource() -> types.CallToolResult:
    return types.CallToolResult(
        content=[_embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")]
    )


@server.tool(description="Returns a text, an image and an embedded resource block.")
def test_multiple_content_types() -> types.CallToolResult:
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="Multiple content types test:"),
            types.ImageContent(type="image", data=PNG_B64, mime_type="image/png"),
            _embedded("test://mixed-content-resource", "application/json", '{"test":"data","value":123}'),
        ]
    )


@server.tool(description="Sends three info log messages, 50 ms apart, then answers.")
async def test_tool_with_logging(ctx: Context) -> str:
    for i, text in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
        if i:
            await anyio.sleep(0.05)
        await ctx.log("info", text, logger_name="conformance")
    return "Tool with logging executed successfully"


@server.tool(description="Reports progress 0/100, 50/100 and 100/100, 50 ms apart, then answers.")
async def test_tool_with_progress(ctx: Context) -> str:
    for i, step in enumerate((0, 50, 100)):
        if i:
            await anyio.sleep(0.05)
        await ctx.report_progress(step, 100, f"step {i + 1} of 3")
    return "Tool with progress executed successfully"


@server.tool(description="Always fails (a tool error: isError true).")
def test_error_handling() -> str:
    raise RuntimeError("This tool intentionally returns an error for testing")


@server.tool(description="Asks the client's model (sampling/createMessage) and returns its answer.")
async def test_sampling(prompt: str, ctx: Context) -> str:
    answer = await ctx.session.create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    content = answer.content
    text = content.text if isinstance(content, types.TextContent) else repr(content)
    return f"LLM response: {text}"


async def _elicit(ctx: Context, message: str, schema: dict[str, Any]) -> types.ElicitResult:
    return await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)  # type: ignore[arg-type]


@server.tool(description="Asks the user (elicitation/create) for a username and an email.")
async def test_elicitation(message: str, ctx: Context) -> str:
    result = await _elicit(
        ctx,
        message,
        {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        },
    )
    return f"User response: action={result.action}, content={result.content}"


@server.tool(description="Elicitation whose schema gives a default for every primitive type (SEP-1034).")
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    result = await _elicit(
        ctx,
        "Please review your profile",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name", "default": "John Doe"},
                "age": {"type": "integer", "title": "Age", "minimum": 0, "default": 30},
                "score": {"type": "number", "title": "Score", "default": 95.5},
                "status": {
                    "type": "string",
                    "title": "Status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "title": "Verified", "default": True},
            },
        },
    )
    return f"Elicitation completed: action={result.action}, content={result.content}"


@server.tool(description="Elicitation with the five enum shapes of SEP-1330.")
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    def titled(values: list[tuple[str, str]]) -> list[dict[str, str]]:
        return [{"const": const, "title": title} for const, title in values]

    result = await _elicit(
        ctx,
        "Pick some options",
        {
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {
                    "type": "string",
                    "oneOf": titled([("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third Option")]),
                },
                "legacyEnum": {
                    "type": "string",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                "titledMulti": {
                    "type": "array",
                    "items": {
                        "anyOf": titled([("value1", "First Choice"), ("value2", "Second Choice"), ("value3", "Third Choice")])
                    },
                },
            },
        },
    )
    return f"Elicitation completed: action={result.action}, content={result.content}"


@server.tool(name="json_schema_2020_12_tool", description="A tool whose input schema uses JSON Schema 2020-12 keywords.")
def json_schema_tool(name: str | None = None, address: dict[str, Any] | None = None) -> str:
    return f"name={name!r}, address={address!r}"


# The listed schema is written by hand: the one derived from the signature has no $schema nor $defs.
server._tool_manager.get_tool("json_schema_2020_12_tool").parameters = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


# ---- resources --------------------------------------------------------------------------------


@server.resource("test://static-text", name="static-text", description="A static text resource", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", description="A static binary resource (PNG)", mime_type="image/png")
def static_binary() -> bytes:
    return base64.b64decode(PNG_B64)


@server.resource("test://watched-resource", name="watched-resource", description="A resource to subscribe to", mime_type="text/plain")
def watched_resource() -> str:
    return "Watched resource content"


@server.resource("test://template/{id}/data", name="template-data", description="Data for an id", mime_type="application/json")
def template_data(id: str) -> str:
    return f'{{"id":"{id}","templateTest":true,"data":"Data for ID: {id}"}}'


async def _subscribe(ctx: ServerRequestContext, params: types.SubscribeRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


async def _unsubscribe(ctx: ServerRequestContext, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


async def _set_level(ctx: ServerRequestContext, params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


# MCPServer has no decorators for these 2025-era requests: they go to its lowlevel server
server._lowlevel_server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, _subscribe)
server._lowlevel_server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, _unsubscribe)
server._lowlevel_server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, _set_level)


# ---- prompts ----------------------------------------------------------------------------------


@server.prompt(description="A prompt with no arguments.")
def test_simple_prompt() -> str:
    return "This is a simple prompt for testing."


@server.prompt(description="A prompt with two arguments.")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt(description="A prompt that embeds a resource.")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    return [
        UserMessage(_embedded(resourceUri, "text/plain", "Embedded resource content for testing.")),
        UserMessage("Please process the embedded resource above."),
    ]


@server.prompt(description="A prompt with an image.")
def test_prompt_with_image() -> list[UserMessage]:
    return [
        UserMessage(types.ImageContent(type="image", data=PNG_B64, mime_type="image/png")),
        UserMessage("Please analyze the image above."),
    ]


# ---- completion -------------------------------------------------------------------------------

_WORDS = ["paris", "park", "party", "test", "testing", "tested", "value1", "value2"]


@server.completion()
async def complete(ref: Any, argument: types.CompletionArgument, context: Any) -> types.Completion:
    values = [word for word in _WORDS if word.startswith(argument.value)]
    return types.Completion(values=values, total=len(values), has_more=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    from serving import MemoryEventStore, serve

    serve(server.streamable_http_app(event_store=MemoryEventStore(), retry_interval=1000), "conformance server", port=args.port)


if __name__ == "__main__":
    main()
