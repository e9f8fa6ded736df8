"""`tapes record --script FILE`: record a session without writing a client. The official SDK
client connects (it decides: `initialize`, or `server/discover` at 2026-07-28) through the normal
recorder (`tapes record` as its server command on stdio; `tapes record --upstream` over HTTP),
then runs FILE's steps in order.

FILE is YAML (JSON is YAML too): a list of steps,

    - method: tools/call
      params: {name: add_note, arguments: {title: "${TITLE:-groceries}", text: milk}}
      answers:                      # optional: what the client answers the server meanwhile
        sampling: {role: assistant, content: {type: text, text: Paris}, model: scripted}
        roots: [{uri: "file:///work", name: work}]
        elicitation: {action: accept, content: {name: Ada}}
      expect: error                 # optional: this step is meant to fail

`${VAR}` and `${VAR:-default}` are replaced from the environment in the file's text before it is
parsed, so `n: ${N:-3}` is a number. A step's server→client requests get its `answers`, else the
defaults below. A step that fails unexpectedly is reported and the next one still runs; the
exit status is then 1.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import mcp.types as types
import yaml
from mcp import Client, MCPError, StdioServerParameters
from mcp.client import ClientRequestContext
from pydantic import ValidationError

from recorder.process import TAPES, HttpRecorderProcess
from tapes.errors import UserError

DEFAULT_ANSWERS: dict[str, Any] = {
    "sampling": {"role": "assistant", "content": {"type": "text", "text": "A scripted answer from tapes record."},
                 "model": "tapes-script", "stopReason": "endTurn"},
    "roots": [],
    "elicitation": {"action": "decline"},
}
_ANSWER_MODELS: dict[str, Callable[[Any], Any]] = {
    "sampling": types.CreateMessageResult.model_validate,
    "roots": lambda roots: types.ListRootsResult.model_validate({"roots": roots}),
    "elicitation": types.ElicitResult.model_validate,
}
STEP_TIMEOUT = 60.0  # seconds, for one step

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def substitute(text: str, environ: Mapping[str, str], name: str = "the script") -> str:
    """`${VAR}` / `${VAR:-default}` replaced from `environ` (the default when VAR is unset or empty)."""

    def value(match: re.Match[str]) -> str:
        variable, default = match[1], match[2]
        found = environ.get(variable)
        if found:
            return found
        if default is None:
            raise UserError(f"{name}: ${{{variable}}} is not set in the environment and has no default (${{{variable}:-...}})")
        return default

    return _VARIABLE.sub(value, text)


@dataclass(frozen=True)
class Step:
    number: int
    method: str
    params: dict[str, Any] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    expect_error: bool = False

    def describe(self) -> str:
        target = self.params.get("name") or self.params.get("uri")
        return f"step {self.number} {self.method}" + (f" {target}" if target else "")


async def _ignore_progress(progress: float, total: float | None, message: str | None) -> None:
    """Asking for progress makes the server send it, so the recording has it."""


def _call_tool(client: Client, p: dict[str, Any]) -> Awaitable[Any]:
    return client.call_tool(p["name"], p.get("arguments"), progress_callback=_ignore_progress)


# method -> (required params, how the SDK client sends it)
_METHODS: dict[str, tuple[tuple[str, ...], Callable[[Client, dict[str, Any]], Awaitable[Any]]]] = {
    "ping": ((), lambda client, p: client.send_ping()),
    "tools/list": ((), lambda client, p: client.list_tools(cursor=p.get("cursor"))),
    "tools/call": (("name",), _call_tool),
    "resources/list": ((), lambda client, p: client.list_resources(cursor=p.get("cursor"))),
    "resources/templates/list": ((), lambda client, p: client.list_resource_templates(cursor=p.get("cursor"))),
    "resources/read": (("uri",), lambda client, p: client.read_resource(p["uri"])),
    "resources/subscribe": (("uri",), lambda client, p: client.subscribe_resource(p["uri"])),
    "resources/unsubscribe": (("uri",), lambda client, p: client.unsubscribe_resource(p["uri"])),
    "prompts/list": ((), lambda client, p: client.list_prompts(cursor=p.get("cursor"))),
    "prompts/get": (("name",), lambda client, p: client.get_prompt(p["name"], p.get("arguments"))),
    "logging/setLevel": (("level",), lambda client, p: client.set_logging_level(p["level"])),
    "completion/complete": (("ref", "argument"), lambda client, p: client.complete(
        _reference(p["ref"]), p["argument"], (p.get("context") or {}).get("arguments"))),
}


def _reference(ref: dict[str, Any]) -> types.PromptReference | types.ResourceTemplateReference:
    if ref.get("type") == "ref/prompt":
        return types.PromptReference.model_validate(ref)
    return types.ResourceTemplateReference.model_validate(ref)


def load_script(path: str | Path, environ: Mapping[str, str] = os.environ) -> list[Step]:
    """The steps of a script file, checked before anything is started."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise UserError(f"{path}: cannot be read ({error.strerror})") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: is not YAML or JSON (it is not UTF-8 text)") from None
    try:
        document = yaml.safe_load(substitute(text, environ, str(path)))
    except yaml.YAMLError as error:
        raise UserError(f"{path}: is not YAML or JSON ({' '.join(str(error).split())})") from None
    if not isinstance(document, list) or not document:
        raise UserError(f"{path}: holds no steps (a list of {{method: ..., params: {{...}}}})")
    steps = []
    for number, raw in enumerate(document, start=1):
        if not isinstance(raw, dict) or not isinstance(raw.get("method"), str):
            raise UserError(f"{path}: step {number} has no method (each step is {{method: ..., params: {{...}}}})")
        unknown = set(raw) - {"method", "params", "answers", "expect"}
        method, params, answers = raw["method"], raw.get("params") or {}, raw.get("answers") or {}
        if unknown:
            raise UserError(f"{path}: step {number} has unknown keys: {', '.join(sorted(unknown))}")
        if method not in _METHODS:
            raise UserError(f"{path}: step {number}: {method!r} is not a method a script can send "
                            f"(one of: {', '.join(_METHODS)})")
        if not isinstance(params, dict) or not isinstance(answers, dict):
            raise UserError(f"{path}: step {number}: params and answers are maps")
        if missing := [name for name in _METHODS[method][0] if name not in params]:
            raise UserError(f"{path}: step {number}: {method} needs params.{missing[0]}")
        if unknown_answers := set(answers) - set(DEFAULT_ANSWERS):
            raise UserError(f"{path}: step {number}: answers are for {', '.join(DEFAULT_ANSWERS)}, "
                            f"not {', '.join(sorted(unknown_answers))}")
        for kind, answer in answers.items():
            try:
                _ANSWER_MODELS[kind](answer)
            except ValidationError as error:
                problem = error.errors()[0]
                raise UserError(f"{path}: step {number}: answers.{kind} is not valid "
                                f"({'.'.join(map(str, problem['loc']))}: {problem['msg']})") from None
        if raw.get("expect", "ok") not in ("ok", "error"):
            raise UserError(f"{path}: step {number}: expect is ok or error")
        steps.append(Step(number, method, params, answers, raw.get("expect") == "error"))
    return steps


class _Answers:
    """The client callbacks: each answers from the running step's `answers`, else the default."""

    def __init__(self) -> None:
        self.step: Step | None = None

    def _answer(self, kind: str) -> Any:
        return _ANSWER_MODELS[kind]((self.step.answers if self.step else {}).get(kind, DEFAULT_ANSWERS[kind]))

    async def sampling(self, context: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        return self._answer("sampling")

    async def roots(self, context: ClientRequestContext) -> Any:
        return self._answer("roots")

    async def elicitation(self, context: ClientRequestContext, params: Any) -> Any:
        return self._answer("elicitation")


async def run_steps(target: Any, steps: list[Step], *, mode: str = "auto", report: Callable[[str], None]) -> int:
    """Connect to `target` with the SDK client and run the steps; how many failed unexpectedly."""
    answers = _Answers()
    failures = 0
    async with AsyncExitStack() as stack:
        try:
            client = await stack.enter_async_context(Client(
                target, mode=mode, read_timeout_seconds=STEP_TIMEOUT, sampling_callback=answers.sampling,
                list_roots_callback=answers.roots, elicitation_callback=answers.elicitation, cache=None))
        except Exception as error:  # MCPError or OSError, often wrapped in the SDK's task groups
            raise UserError(f"the SDK client could not connect to the server: {_innermost(error)}") from None
        report(f"tapes record: connected ({client.protocol_version})")
        for step in steps:
            answers.step = step
            send = _METHODS[step.method][1]
            try:
                with anyio.fail_after(STEP_TIMEOUT):
                    result = await send(client, step.params)
                outcome = "tool error" if getattr(result, "is_error", False) else "ok"
            except MCPError as error:
                outcome = f"error {error.code}: {error.message}"
            except TimeoutError:
                outcome = f"error: no answer in {STEP_TIMEOUT:g} s"
            failed = outcome != "ok"
            if failed != step.expect_error:
                failures += 1
                outcome += " (expected an error)" if step.expect_error else ""
            report(f"  {step.describe()}: {outcome}")
    return failures


def _innermost(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return str(error) or type(error).__name__


def record_script(script: str, output: str, recorder_flags: list[str], *, command: list[str] | None = None,
                  upstream: str | None = None) -> int:
    """Record the session the script drives; the exit status (1 when a step failed unexpectedly)."""
    steps = load_script(script)

    def report(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if command:
        argv = [*TAPES, "record", "-o", output, *recorder_flags, "--", *command]
        target: Any = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
        failures = anyio.run(lambda: run_steps(target, steps, report=report))
    else:
        assert upstream is not None
        recorder = HttpRecorderProcess(Path(output), upstream, recorder_flags)
        try:
            if urlsplit(upstream).path.rstrip("/").endswith("/sse"):  # a legacy HTTP+SSE server
                from mcp.client.sse import sse_client

                failures = anyio.run(lambda: run_steps(sse_client(recorder.url), steps, mode="legacy", report=report))
            else:
                failures = anyio.run(lambda: run_steps(recorder.url, steps, report=report))
        finally:
            recorder.stop()
    report(f"tapes record: wrote {output}" + (f"; {failures} step{'s' * (failures != 1)} failed" if failures else ""))
    return int(failures > 0)
