"""JSON-RPC messages as dicts, for building recordings and live traffic in tests."""

from __future__ import annotations

from typing import Any


def req(id_: Any, method: str, params: Any = None, token: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None or token is not None:
        message["params"] = dict(params or {})
        if token is not None:
            message["params"]["_meta"] = {"progressToken": token}
    return message


def res(id_: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def note(method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def progress(token: Any, value: int) -> dict[str, Any]:
    return note("notifications/progress", {"progressToken": token, "progress": value})
