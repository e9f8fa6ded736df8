"""The pytest plugin (entry point `pytest11: tapes`): a marker and fixtures that hand the code
under test a replaying (or recording) MCP server. A composition root, like the CLI.

    @pytest.mark.tape(server=["python", "weather.py"])
    def test_forecast(tape_server):          # an argv: launch it as the stdio server
        ...

    @pytest.mark.tape("cassettes/weather-http.tape")
    def test_forecast_http(tape_url):        # the URL of an in-process HTTP replayer
        ...

    @pytest.mark.tape(server=["python", "weather.py"])
    async def test_forecast_fast(tape_transport):   # for the Python SDK: Client(tape_transport)
        ...

Markers merge like pytest-recording's: a module's `pytestmark = pytest.mark.tape(...)`, a class's
and a test's own are combined, the closer one winning per argument (`ignore` lists add up), over
the `tape_config` fixture (override it in a conftest.py for a suite's defaults) and
`[tool.tapes]`. An argument the marker does not know fails the test by name.

Record modes (`--tape-record-mode`, ini `tape_record_mode`, `[tool.tapes] record-mode`):
`none` replays only and fails on a missing cassette; `once` records when the cassette is
missing and replays otherwise; `new_episodes` replays what the cassette has and, at the first
request it lacks, hands the session to the real server (warmed up to the live session's state)
and adds what it says to the cassette (stdio); `all` always records, replacing the cassette only
when the test passes; `rewrite` records, and the cassette is gone if the test fails. Under both, a
recording that behaves as the cassette did (`tapes.analysis.rerecord`) leaves it byte for byte.
Default: `none` when the CI environment variable is set, `once` otherwise.

A cassette's format follows its name: `.jsonl` is JSON Lines, `.tape` msgpack; `[tool.tapes]
format = "jsonl"` makes the default names `.jsonl`.
"""

from __future__ import annotations

import difflib
import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from recorder.process import TAPES
from tapes.analysis.rerecord import scratch_beside, settle
from tapes.cassette.frames import STDIO, Frame, Kind
from tapes.cassette.redact import RedactionRuleError, RedactionRules
from tapes.cassette.store import Cassette, Header, load, stream, unapplied_in_capture
from tapes.config import FORMATS, RECORD_MODES, Config, load_config
from tapes.errors import UserError
from tapes.replay.control import ReplayControl
from tapes.replay.matching import portable_matcher_name

T = TypeVar("T")
_CONTROL_OPTIONS = ("match", "ignore", "race", "repeats", "polls", "timing", "faults")
_LISTS = ("ignore", "faults", "redact_headers", "redact_paths")  # what adds up when markers merge
_FLAGS = ("freeze_time", "fail_on_unused")
_TEXTS = ("upstream", "before_record", "match", "race", "repeats", "polls", "timing")
MARKER_ARGUMENTS = ("server", "upstream", "before_record", "redact_headers", "redact_paths", *_CONTROL_OPTIONS,
                    "freeze_time", "fail_on_unused")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tapes", "mcp-tapes: record and replay MCP sessions")
    group.addoption("--tape-record-mode", choices=RECORD_MODES, default=None,
                    help="none | once | new_episodes | all | rewrite (default: none under CI, once otherwise)")
    parser.addini("tape_record_mode", "default record mode for @pytest.mark.tape tests", default=None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "tape(path=None, *, server=None, upstream=None, before_record=None, redact_headers=(), redact_paths=(), "
        "match=None, ignore=(), race=None, repeats=None, polls=None, timing=None, faults=(), freeze_time=False, "
        "fail_on_unused=False): replay (or record) an MCP session from a cassette",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    report = yield
    if report.when == "call":
        item.stash[_PASSED] = report.passed
    return report


_PASSED = pytest.StashKey[bool]()


@dataclass
class Tape:
    """One test's cassette: where it is, whether this run records or replays, and what the
    replay did (`report`, read after the code under test has closed the server)."""

    path: Path
    mode: str
    recording: bool
    server: list[str] | None
    upstream: str | None
    hook_flags: list[str]  # --before-record, for `tapes record`
    redact_path_flags: list[str]  # for `tapes record` and a new-episodes replay, stdio or HTTP
    redact_header_flags: list[str]  # and these over HTTP
    control: ReplayControl
    control_flags: list[str]  # the same, as `tapes replay` flags
    report_path: Path
    fail_on_unused: bool
    # where a recording goes, and what a new-episodes replay serves and adds to: a scratch file,
    # put in place of the cassette if the test passed (a run killed half-way leaves the scratch,
    # which no test replays, and the next recording writes over)
    writing_to: Path = field(init=False)

    def __post_init__(self) -> None:
        scratch = "recording" if self.recording else "episodes" if self.adding else None
        self.writing_to = scratch_beside(self.path, scratch) if scratch else self.path

    @property
    def adding(self) -> bool:
        """A new-episodes replay: the real server takes over at the first miss, and what it says is added."""
        return self.mode == "new_episodes" and not self.recording

    @property
    def record_flags(self) -> list[str]:
        return [*self.hook_flags, *self.redact_path_flags]

    @property
    def http_record_flags(self) -> list[str]:
        return [*self.record_flags, *self.redact_header_flags]

    def server_command(self) -> list[str]:
        """The stdio server for the code under test: the recorder around the real server, or the replayer."""
        if self.recording:
            if not self.server:
                pytest.fail(f"cannot record {self.path}: the tape marker names no server=[...] command", pytrace=False)
            return [*TAPES, "record", "-o", str(self.writing_to), *self.record_flags, "--", *self.server]
        replay = [*TAPES, "replay", str(self.writing_to), "--allow-unmatched", "--report", str(self.report_path),
                  *self.control_flags]
        if self.adding:
            if not self.server:
                pytest.fail(f"cannot add new episodes to {self.path}: the tape marker names no server=[...] command",
                            pytrace=False)
            # the replay flags carry the hook
            return [*replay, "--new-episodes", *self.redact_path_flags, "--", *self.server]
        return replay

    @property
    def report(self) -> dict[str, Any] | None:
        """The replay's summary (played, repeated, unmatched, unused, recorded), once the replayer stopped."""
        if not self.report_path.exists():
            return None
        return json.loads(self.report_path.read_text())


def _record_mode(config: pytest.Config, settings: Config) -> str:
    mode = config.getoption("--tape-record-mode") or config.getini("tape_record_mode") or settings.record_mode
    if mode is None:
        mode = "none" if os.environ.get("CI") else "once"
    if mode not in RECORD_MODES:
        pytest.fail(f"tape record mode {mode!r} is not one of {', '.join(RECORD_MODES)}", pytrace=False)
    return mode


# The longest a default cassette name may be, in bytes, so that the longest scratch name made from
# it (NAME.episodes.tape.episode: a stdio new-episodes replay's) still fits a file system's 255.
_NAME_BYTES = 255 - len(".episodes") - len(".episode")


def _default_path(request: pytest.FixtureRequest, settings: Config) -> Path:
    """cassettes/<module>/[<Outer>.][<Class>.]<test>[-<parameter id>]: one file per test. A
    parameter id follows a "-", which no test's own name holds; one with characters a file name
    should not (spaces, "/", "?") has them made "_" and a hash of the id added, so ids that differ
    only in those characters do not share a file. A name too long for a file is cut, and a hash of
    the whole added."""
    name, _, parameters = request.node.name.partition("[")
    if request.cls is not None:
        # the classes a nested one is in tell apart same-named inner classes
        outer = [node.name for node in request.node.listchain() if isinstance(node, pytest.Class)][:-1]
        name = ".".join([*outer, request.cls.__name__, name])
    if parameters:
        given = parameters.removesuffix("]")
        shown = re.sub(r"[^\w.-]+", "_", given).strip("_")
        name += f"-{shown}" + (f"-{_short_hash(given)}" if shown != given else "")
    suffix = FORMATS[settings.format]
    if len(f"{name}{suffix}".encode()) > _NAME_BYTES:
        kept = _NAME_BYTES - len(f"-{_short_hash(name)}{suffix}")
        name = f"{name.encode()[:kept].decode(errors='ignore')}-{_short_hash(name)}"
    return request.path.parent / settings.cassette_dir / request.path.stem / f"{name}{suffix}"


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _control(asked: dict[str, Any], settings: Config) -> tuple[ReplayControl, list[str]]:
    """The replay control the markers and [tool.tapes] ask for, and the same as `tapes replay` flags.
    A bad name fails here, in the test's setup, not in the replayer."""
    return _or_fail(_control_and_flags, asked, settings, prefix="tape marker: ")


def _or_fail(call: Callable[..., T], *args: Any, prefix: str = "") -> T:
    """`call(*args)`, or the test failed with the one sentence of the UserError it raised (failed
    out of the except block: pytest would show the error it handled too)."""
    try:
        return call(*args)
    except UserError as error:
        problem = f"{prefix}{error}"
    pytest.fail(problem, pytrace=False)


def _control_and_flags(asked: dict[str, Any], settings: Config) -> tuple[ReplayControl, list[str]]:
    values = settings.control_settings()
    values.update({name: asked[name] for name in _CONTROL_OPTIONS if asked.get(name) is not None})
    values["ignore"] = (*settings.ignore, *asked.get("ignore", ()))
    values["faults"] = (*settings.faults, *asked.get("faults", ()))
    hook = asked.get("before_record") or settings.before_record
    control = ReplayControl.build(**values, before_record=hook)
    flags = []
    for name in ("match", "race", "repeats", "polls", "timing"):
        flags += [f"--{name}", str(values[name])]
    # a stdio replay runs in a process of its own: a matcher registered here goes by its file
    flags[1] = portable_matcher_name(flags[1])
    for pointer in values["ignore"]:
        flags += ["--ignore", pointer]
    for fault in values["faults"]:
        flags += ["--fault", fault]
    if hook:
        flags += ["--before-record", hook]
    return control, flags


@pytest.fixture
def tape_config() -> dict[str, Any]:
    """A suite's default marker arguments (override this fixture in a conftest.py); markers win."""
    return {}


def _merged(request: pytest.FixtureRequest, defaults: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The cassette path and the arguments of every tape marker on the test, module's first and
    the test's own last; a closer marker wins per argument, `ignore` lists add up."""
    markers = list(request.node.iter_markers("tape"))  # closest first
    if not markers:
        pytest.fail("the tape fixtures need a @pytest.mark.tape(...) marker on the test", pytrace=False)
    for marker in markers:
        if len(marker.args) > 1 or (marker.args and not isinstance(marker.args[0], str | os.PathLike)):
            pytest.fail(f"tape marker: its one positional argument is the cassette's path, a string (got "
                        f"{', '.join(repr(arg) for arg in marker.args)})", pytrace=False)
    path = next((marker.args[0] for marker in markers if marker.args), None)
    asked: dict[str, Any] = {}
    for source in [defaults, *(marker.kwargs for marker in reversed(markers))]:
        for name, value in source.items():
            if name not in MARKER_ARGUMENTS:
                close = difflib.get_close_matches(name, MARKER_ARGUMENTS, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                pytest.fail(f"tape marker: unknown argument {name!r}{hint}; it takes {', '.join(MARKER_ARGUMENTS)}",
                            pytrace=False)
            if name == "server" and value is not None:
                _listed(name, value)
            elif name in _FLAGS and not isinstance(value, bool):
                pytest.fail(f"tape marker: {name} is True or False, not {value!r}", pytrace=False)
            elif name in _TEXTS and value is not None and not isinstance(value, str) and not (
                    name == "timing" and type(value) in (int, float)):  # a speed factor may be a number
                pytest.fail(f"tape marker: {name} is a string, not {value!r}", pytrace=False)
            asked[name] = (*asked.get(name, ()), *_listed(name, value)) if name in _LISTS else value
    return path, asked


def _listed(name: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        pytest.fail(f"tape marker: {name} is not a list of strings (e.g. {name}=[...])", pytrace=False)
    return tuple(value)


def _redaction_flags(asked: dict[str, Any], settings: Config) -> tuple[list[str], list[str]]:
    """`tapes record` flags for the marker's and [tool.tapes]'s redaction rules: (paths, headers);
    a bad JSON path fails the test's setup here."""
    headers = (*settings.redact_headers, *asked.get("redact_headers", ()))
    paths = (*settings.redact_paths, *asked.get("redact_paths", ()))
    try:
        RedactionRules.default(headers, paths)
        problem = None
    except RedactionRuleError as error:
        problem = str(error)
    if problem:  # failed out of the except block: pytest would show the error it handled too
        pytest.fail(f"tape marker: {problem}", pytrace=False)
    return ([flag for path in paths for flag in ("--redact-path", path)],
            [flag for name in headers for flag in ("--redact-header", name)])


@pytest.fixture
def tape(request: pytest.FixtureRequest, tmp_path: Path, tape_config: dict[str, Any]) -> Iterator[Tape]:
    given_path, asked = _merged(request, tape_config)
    settings = _or_fail(load_config, request.path.parent)
    mode = _record_mode(request.config, settings)
    path = request.path.parent / given_path if given_path else _default_path(request, settings)
    if mode == "none" and not path.exists():
        pytest.fail(f"cassette {path} is missing and the record mode is none (record it with "
                    "--tape-record-mode=once)", pytrace=False)
    recording = mode in ("all", "rewrite") or not path.exists()
    writing = recording or mode == "new_episodes"
    if writing and (problem := _unwritable(path)):
        pytest.fail(f"cannot record {path}: {problem}", pytrace=False)
    hook = asked.get("before_record") or settings.before_record
    path_flags, header_flags = _redaction_flags(asked, settings)
    with ExitStack() as writer:
        if writing:
            writer.enter_context(_sole_writer(path))
            # a test of another worker may have recorded it while this one waited
            recording = mode in ("all", "rewrite") or not path.exists()
        handle = Tape(path, mode, recording, asked.get("server"), asked.get("upstream"),
                      ["--before-record", hook] if hook else [], path_flags, header_flags, *_control(asked, settings),
                      tmp_path / "tape-report.json", bool(asked.get("fail_on_unused")))
        if handle.adding:
            shutil.copyfile(path, handle.writing_to)
        with ExitStack() as stack:
            if asked.get("freeze_time") and not recording:
                stack.enter_context(_or_fail(_frozen_at_recording, path))
            yield handle
        _finish(request, handle)


@contextmanager
def _sole_writer(path: Path) -> Iterator[None]:
    """Hold the lock of the cassette at `path` while the block runs: a test of another pytest-xdist
    worker that writes it too waits its turn, where both recording into one file lost frames.
    Waited for, not failed: tests sharing a cassette under `once` (the first records, the others
    replay) pass with -n as without. The lock file goes when it is let go."""
    lock = path.with_name(path.name + ".lock")
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.path.samestat(os.fstat(fd), os.stat(lock)):
                break
        except FileNotFoundError:
            pass
        os.close(fd)  # its holder removed it as it let go: lock the one there is now
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)  # before letting go, so a waiter never holds a removed lock unawares
        os.close(fd)


def _unwritable(path: Path) -> str | None:
    """Why a cassette cannot be written at `path` (its folder is made if missing); None if it can."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a name of its own: workers of pytest-xdist probing one folder at once removed each other's
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.name + ".", suffix=".probe"):
            pass
    except OSError as error:
        return error.strerror or str(error)
    return None


def _frozen_at_recording(path: Path) -> Any:
    from datetime import datetime

    from freezegun import freeze_time

    created = _header(path).created
    try:
        moment = datetime.fromisoformat(created)
    except (TypeError, ValueError):
        moment = None
    if moment is None:  # failed out of the except block: pytest would show the error it handled too
        pytest.fail(f"freeze_time: cassette {path} says it was created {created!r}, not an ISO 8601 time to freeze the "
                    "clock at", pytrace=False)
    # real_asyncio: the event loop's clock keeps running, so timeouts in the code under test still work
    return freeze_time(moment, real_asyncio=True)


def _loaded(path: Path) -> Cassette:
    """The cassette, with what its loading warns of (a truncated last frame) as a test warning."""
    cassette = load(path)
    for warning in cassette.warnings:
        warnings.warn(UserWarning(f"replay of {path}: {warning}"), stacklevel=2)
    return cassette


def _header(path: Path) -> Header:
    """The cassette's header alone: read without its frames, which may be millions."""
    with stream(path) as recording:
        return recording.header


def _finish(request: pytest.FixtureRequest, handle: Tape) -> None:
    passed = request.node.stash.get(_PASSED, False)
    if handle.recording:
        if not handle.writing_to.exists():
            if passed:
                _nothing_recorded(request, handle, "the test never started its server")
            return
        exchanges = _http_exchanges(handle.writing_to) if handle.upstream is not None else None
        unreachable = exchanges is not None and _upstream_failed(exchanges)
        sent_nothing = exchanges is not None and not any(frame.kind is Kind.HTTP_REQUEST for frame in exchanges)
        if not passed or unreachable or sent_nothing:
            # a failed recording is not kept: the next run records again; nor an empty one, which no replay could serve
            handle.writing_to.unlink()
            if handle.mode == "rewrite" and (not passed or unreachable):
                handle.path.unlink(missing_ok=True)
            if unreachable:
                pytest.fail(f"upstream unreachable at {handle.upstream}: nothing was recorded to {handle.path}",
                            pytrace=False)
            if passed:
                _nothing_recorded(request, handle, "the test sent no request")
        elif unapplied := _unscrubbed(handle.writing_to):
            pytest.fail(f"the recording of {handle.path} did not finish, so {', '.join(unapplied)} was not applied to it: "
                        f"it did not take the cassette's place, and is kept in {handle.writing_to} (the recorder said why "
                        "on stderr)", pytrace=False)
        elif handle.writing_to != handle.path:
            settle(handle.writing_to, handle.path)
        return
    if handle.adding:  # what the real server said is kept only for a test that passed, as a recording is
        if passed:
            settle(handle.writing_to, handle.path)
        else:
            handle.writing_to.unlink(missing_ok=True)
    report = handle.report
    if report is None or not passed:
        return  # the server was never started (or is still running), or the test failed already
    problems = [f"unmatched {miss['summary']}: {miss['reason']}" for miss in report["unmatched"]]
    unfired = [f"fault never fired: {spec}" for spec in report.get("unfired_faults", ())]
    if handle.fail_on_unused:
        if report.get("complete") is False:  # killed while it read the rest of a big cassette
            problems.append("the replay was stopped before it had read the whole cassette, so which recorded "
                            "requests went unused is not known")
        else:
            problems += [f"unused {request}" for request in report["unused"]]
        problems += unfired
    else:
        for line in unfired:  # the fault's request never came: the test did not test what it meant to
            request.node.warn(UserWarning(f"replay of {handle.path}: {line}"))
    if problems:
        pytest.fail(f"replay of {handle.path} did not go as recorded:\n  " + "\n  ".join(problems), pytrace=False)


RECORDER_GRACE = 5.0
"""Seconds a stdio recording may take to finish after its test: a client that does not wait for its
server leaves the recorder's end (its frames made, scrubbed) to the teardown."""


def _unscrubbed(recording: Path) -> list[str]:
    """The redaction rules and before-record hook a stdio recording has not been through, because
    its recorder did not finish it (its hook raised, say): kept, it would hold what they remove."""
    deadline = time.monotonic() + RECORDER_GRACE
    while (unapplied := unapplied_in_capture(recording)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return unapplied or []


def _nothing_recorded(request: pytest.FixtureRequest, handle: Tape, why: str) -> None:
    """A test passed with nothing to keep: said, as the next run records again."""
    request.node.warn(UserWarning(f"recording of {handle.path}: {why}, so nothing was recorded and the cassette was "
                                  "not written"))


def _http_exchanges(recording: Path) -> list[Frame] | None:
    """The frames of an HTTP recording; None for a stdio one (a marker may name an upstream it does
    not use), or one that does not load."""
    try:
        cassette = load(recording)
    except UserError:
        return None
    return cassette.frames if cassette.header.transport != STDIO else None


def _upstream_failed(frames: list[Frame]) -> bool:
    """Whether the recorder could not reach the upstream on an exchange of the recording."""
    return any(frame.kind is Kind.STREAM_END and (frame.info or {}).get("reason") == "upstream_error" for frame in frames)


@pytest.fixture
def tape_server(tape: Tape) -> list[str]:
    """argv of the stdio server the code under test should launch (replaying or recording)."""
    if not tape.recording:
        transport = _or_fail(_header, tape.path).transport
        if transport != STDIO:
            pytest.fail(f"{tape.path} was recorded over HTTP: use the tape_url fixture to replay it", pytrace=False)
    return tape.server_command()


@pytest.fixture
def tape_transport(tape: Tape) -> Any:
    """What to hand the official Python SDK's `Client(...)`: when replaying, an in-memory transport
    whose other end is the replay engine (no process, no socket: the cheapest replay); when
    recording, the stdio server parameters of `tapes record` around the marker's server."""
    if tape.recording or tape.adding:
        from mcp import StdioServerParameters

        command = tape.server_command()
        return StdioServerParameters(command=command[0], args=command[1:])
    from replayer.memory import ReplayTransport

    return _or_fail(lambda: ReplayTransport(_loaded(tape.path), tape.control, tape.report_path))


@pytest.fixture
def tape_url(tape: Tape) -> Iterator[str]:
    """The URL the code under test should use: an in-process HTTP replayer serving the test's
    cassette, or, when recording, `tapes record --upstream` in front of the marker's upstream."""
    if tape.recording:
        if not tape.upstream:
            pytest.fail(f"cannot record {tape.path}: the tape marker names no upstream=URL", pytrace=False)
        with _http_recorder(tape.writing_to, tape.upstream, tape.http_record_flags) as url:
            yield url
        return
    from replayer.http import ReplayOptions, replay_server
    from tapes.replay.episodes import NewEpisodes

    if _or_fail(_header, tape.path).transport == STDIO:
        pytest.fail(f"{tape.path} was recorded over stdio: use the tape_server (or tape_transport) fixture to replay it",
                    pytrace=False)
    cassette = _or_fail(_loaded, tape.writing_to)
    if not any(frame.kind is Kind.HTTP_REQUEST for frame in cassette.frames):  # the replayer's refusal names the CLI's flags
        pytest.fail(f"{tape.path} has no HTTP requests to replay (it recorded nothing): delete it to record it again",
                    pytrace=False)
    options = ReplayOptions(control=tape.control)
    if tape.adding:
        if not tape.upstream:
            pytest.fail(f"cannot add new episodes to {tape.path}: the tape marker names no upstream=URL", pytrace=False)
        options.new_episodes = NewEpisodes(tape.upstream, tape.writing_to, tape.http_record_flags)
    with ExitStack() as stack:  # a cassette the replay refuses (one it cannot send, say) fails the test in its sentence
        server = _or_fail(stack.enter_context, replay_server(cassette, options=options))
        yield server.url
    tape.report_path.write_text(json.dumps(server.replayer.report().as_json()))  # judged at the tape's teardown


@contextmanager
def _http_recorder(output: Path, upstream: str, flags: list[str]) -> Iterator[str]:
    """`tapes record --upstream` on a free port while the block runs; yields where the client goes."""
    from recorder.process import HttpRecorderProcess

    recorder = _or_fail(HttpRecorderProcess, output, upstream, flags)
    try:
        yield recorder.url
    finally:
        recorder.stop()
