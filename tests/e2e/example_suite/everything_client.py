"""A small client library for server-everything: the code under test of the example suite.
It takes the server as an argv list (stdio) or a URL (Streamable HTTP), as a real library would."""

from __future__ import annotations

from mcp import Client, StdioServerParameters


def _server(where: list[str] | str) -> StdioServerParameters | str:
    return StdioServerParameters(command=where[0], args=where[1:]) if isinstance(where, list) else where


async def echo(where: list[str] | str, message: str) -> str:
    """What the server's echo tool says back."""
    async with Client(_server(where), cache=None) as client:
        result = await client.call_tool("echo", {"message": message})
    return result.content[0].text


async def add(where: list[str] | str, a: int, b: int) -> str:
    """The server's sum of two numbers, as it phrases it."""
    async with Client(_server(where), cache=None) as client:
        result = await client.call_tool("get-sum", {"a": a, "b": b})
    return result.content[0].text
