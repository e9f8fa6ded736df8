"""The `tapes` command. A composition root: it wires the core to the recorder and replayer
adapters, so it is the one module of `tapes` allowed to import them."""

from __future__ import annotations

import io
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click

from tapes import __version__
from tapes.config import RECORD_MODES
from tapes.errors import ERROR_PREFIX, UserError
from tapes.wire.text import is_digits
from tapes.replay.engine import Race, Repeats
from tapes.replay.polls import Polls


class _Group(click.Group):
    """Turns a UserError anywhere below, a mistake in a command's arguments, or an output the
    machine cannot write (a full disk, a stdout that fails), into one line on stderr and exit code 2; a Ctrl-C where no command
    handles it itself into exit 130, as a shell reports it (click would print "Aborted!", exit 1)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            ctx.exit(128 + signal.SIGINT)
        except _Signalled as stop:
            ctx.exit(128 + stop.signum)
        except click.UsageError as error:  # a mistake on the command line: one line too (click prints usage)
            command = f"tapes {error.ctx.info_name}" if error.ctx is not None and error.ctx.parent is not None else "tapes"
            click.echo(f"{ERROR_PREFIX}{error.format_message()} ({command} --help lists what it takes)", err=True)
            ctx.exit(2)
        except UserError as error:
            click.echo(f"{ERROR_PREFIX}{error}", err=True)
            ctx.exit(2)
        except BrokenPipeError:
            raise  # the reader went away (`| head`): as ever
        except OSError as error:
            _discard_stdout()
            said = f"{error.filename}: {error.strerror}" if error.filename else f"stdout: cannot be written ({error.strerror})"
            click.echo(f"{ERROR_PREFIX}{said}", err=True)
            ctx.exit(2)


class _Signalled(BaseException):
    """A SIGTERM or SIGHUP, raised where the command was (see `_signals_unwind`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def _signals_unwind() -> Iterator[None]:
    """SIGTERM and SIGHUP end the command as Ctrl-C does, as an exception: what it started (a
    recorder and its server, a scratch folder) is stopped and removed on the way out, where the
    default action would leave them running. Exit 128 + the signal's number."""

    def stop(signum: int, _frame: object) -> None:
        raise _Signalled(signum)

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGHUP)
                if signal.getsignal(signum) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _load(path: str) -> Any:
    """The whole cassette at `path` (`load`), with what its loading warns of (a truncated last
    frame, whose frames before it are kept) said on stderr: the command goes on with them."""
    from tapes.cassette.store import load

    cassette = load(path)
    _warn(cassette.warnings)
    return cassette


def _warn(warnings: list[str]) -> None:
    """What loading a cassette warned of, on stderr."""
    from tapes.wire.text import terminal_line

    for warning in warnings:
        click.echo(f"tapes: warning: {terminal_line(warning)}", err=True)


@contextmanager
def _naming(cassette: str) -> Iterator[None]:
    """A frame the replay or verify cannot use is said with the cassette's name in front."""
    from tapes.cassette.store import FrameError

    try:
        yield
    except FrameError as error:
        raise error.in_file(cassette) from None


@contextmanager
def _converting(cassette: str) -> Iterator[None]:
    """A frame that the output's format cannot hold, of a cassette converted as it was loaded, is
    said as damage in that cassette: its frame and byte offset there."""
    from tapes.cassette.store import NoJsonForm

    try:
        yield
    except NoJsonForm as error:
        raise error.where_read(cassette) from None


def _discard_stdout() -> None:
    """What is still buffered for stdout goes to /dev/null, not into an error at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)


def _given(parameter: str) -> bool:
    """Whether the user gave this option (on the command line or in its environment variable),
    rather than it taking its default."""
    source = click.get_current_context().get_parameter_source(parameter)
    return source is not None and source is not click.core.ParameterSource.DEFAULT


def _is_stdout(output: str) -> bool:
    """`-`, or a path to the file stdout is (/dev/stdout, /proc/self/fd/1)."""
    if output == "-":
        return True
    try:
        return os.path.samestat(os.stat(output), os.fstat(1))
    except OSError:  # not there yet; no stdout at all
        return False


def _refuse_the_cassette_itself(output: Path, cassette: str, flag: str, instead: str) -> None:
    """An output that is the cassette read (by name or through a link) would be emptied as it is read."""
    if output.exists() and output.samefile(cassette):
        raise UserError(f"{flag} is the cassette itself: {instead}")


def _listen_address(text: str) -> tuple[str, int]:
    """--listen HOST:PORT (PORT 0 picks a free port)."""
    host, colon, port = text.rpartition(":")
    if not colon or not host or not is_digits(port) or int(port) > 65535:
        raise UserError(f"--listen {text!r} is not HOST:PORT (e.g. 127.0.0.1:8080)")
    return host.strip("[]"), int(port)


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="tapes")
def main() -> None:
    """Record MCP sessions into cassettes and replay them as a deterministic mock server."""
    from tapes.cassette.store import RECURSION

    _hold_standard_streams()
    # show, view, diff, lint and redact walk messages recursively, as deep as a cassette nests them
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION))


def _hold_standard_streams() -> None:
    """A stdin, stdout or stderr the caller left closed gets /dev/null in its place, so that no file
    opened later (a cassette, a pipe to a server) takes its number and gets what is meant for it."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:  # os.open takes the lowest free number: this one, the ones below being held
            os.set_inheritable(os.open(os.devnull, os.O_RDWR), True)
        if getattr(sys, name) is None:  # Python found it closed at start
            setattr(sys, name, open(fd, mode, closefd=False))  # noqa: SIM115 - for the whole run
    for text in (sys.stdout, sys.stderr):
        # A JSON Lines cassette may hold a lone surrogate (JSON can, UTF-8 cannot): shown as its
        # \u escape, as everywhere else, instead of failing the output half-way.
        if isinstance(text, io.TextIOWrapper):
            text.reconfigure(errors="backslashreplace")


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Cassette file to write: NAME.jsonl as JSON Lines, any other name as msgpack; - is stdout "
              "(JSON Lines; HTTP only).")
@click.option("--upstream", metavar="URL", help="Record over HTTP: a reverse proxy to this server URL.")
@click.option("--proxy", is_flag=True, help="Record over HTTP: a forward proxy (HTTP_PROXY/HTTPS_PROXY).")
@click.option(
    "--listen", metavar="HOST:PORT", default="127.0.0.1:8080", show_default=True, help="Where the HTTP recorder listens."
)
@click.option("--redact-header", "redact_headers", multiple=True, metavar="NAME", help="Also redact this header.")
@click.option(
    "--redact-path", "redact_paths", multiple=True, metavar="PATH", help="Redact this JSON path in messages (a.b.*.c)."
)
@click.option("--no-redact", is_flag=True, help="Keep every secret in the cassette (not recommended).")
@click.option(
    "--ca-dir", default="~/.mitmproxy", show_default=True, help="Where --proxy keeps (or creates) its TLS CA."
)
@click.option(
    "--upstream-ca",
    metavar="PEM",
    type=click.Path(exists=True, dir_okay=False),
    help="Verify upstream HTTPS servers' certificates against this CA file (PEM) instead of the default "
    "bundle (certifi), e.g. for a self-signed or internal CA. Verification stays on.",
)
@click.option("--before-record", metavar="MODULE:FUNCTION", help="Pass every frame through this function first.")
@click.option("--script", type=click.Path(exists=True, dir_okay=False),
              help="Drive the server with the SDK client through the steps of this YAML/JSON file (no client needed).")
# for a parent that starts the HTTP recorder on a pipe (recorder.process): its death, even by
# SIGKILL, closes the pipe and so ends the recorder, which would otherwise outlive it
@click.option("--until-stdin-closes", is_flag=True, hidden=True)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def record(
    output: str,
    upstream: str | None,
    proxy: bool,
    listen: str,
    redact_headers: tuple[str, ...],
    redact_paths: tuple[str, ...],
    no_redact: bool,
    ca_dir: str,
    upstream_ca: str | None,
    before_record: str | None,
    script: str | None,
    until_stdin_closes: bool,
    command: tuple[str, ...],
) -> None:
    """Record a session into a cassette.

    \b
    stdio:  tapes record -o FILE -- SERVER COMMAND...   (where the client expects the server command)
    HTTP:   tapes record -o FILE --upstream URL [--listen HOST:PORT]   (point the client at the proxy)
            tapes record -o FILE --proxy [--listen HOST:PORT]          (a forward proxy)
    Scripted (the SDK client runs FILE's steps):
            tapes record --script FILE -o OUT -- SERVER COMMAND...  |  --upstream URL
    """
    if sum((bool(command), upstream is not None, proxy)) != 1:
        raise UserError("record needs exactly one of: a server command after --, --upstream URL, or --proxy")
    if (command or script is not None) and _given("listen"):
        raise UserError("--listen only applies to an HTTP recording (--upstream or --proxy)")
    if (command or script is not None) and until_stdin_closes:
        raise UserError("--until-stdin-closes only applies to an HTTP recording (--upstream or --proxy)")
    if not proxy and _given("ca_dir"):
        raise UserError("--ca-dir only applies to a forward proxy recording (--proxy): it keeps the CA that intercepts HTTPS")
    if script is not None:
        if proxy:
            raise UserError("--script drives a server command (after --) or --upstream URL, not --proxy")
        from recorder.script import record_script

        flags = [*(f for name in redact_headers for f in ("--redact-header", name)),
                 *(f for path in redact_paths for f in ("--redact-path", path)),
                 *(["--no-redact"] if no_redact else []), *(["--before-record", before_record] if before_record else []),
                 *(["--upstream-ca", upstream_ca] if upstream_ca else [])]
        sys.exit(record_script(script, output, flags, command=list(command), upstream=upstream))
    from tapes.cassette.scrub import load_hook
    from tapes.config import load_config

    config = load_config()
    hook_spec = before_record or config.before_record
    hook = load_hook(hook_spec) if hook_spec else None
    if command:
        from recorder.stdio import record_stdio

        if _is_stdout(output):
            raise UserError(f"-o {output} cannot be used with a stdio recording: stdout carries the protocol to the "
                            "client, so the cassette needs a file")
        if upstream_ca:
            raise UserError("--upstream-ca only applies to an HTTP recording (--upstream or --proxy)")
        if redact_headers:
            raise UserError("--redact-header only applies to an HTTP recording (stdio has no headers; "
                            "--redact-path applies to both)")
    if no_redact and (redact_headers or redact_paths):
        raise UserError("--no-redact cannot be combined with --redact-header or --redact-path")
    rules = _redaction_rules(config, redact_headers, redact_paths, no_redact)
    where = "stdout" if output == "-" else output
    if no_redact and not command:
        click.secho(f"tapes: WARNING: --no-redact: secrets (Authorization, cookies, API keys) will be written to {where} "
                    "as sent", err=True, fg="red", bold=True)
    elif no_redact and config.redact_paths:  # stdio redacts only the configured paths: said too
        click.secho(f"tapes: WARNING: --no-redact: the [tool.tapes] redact-paths ({', '.join(config.redact_paths)}) "
                    f"are not applied: their values will be written to {where} as sent", err=True, fg="red", bold=True)
    elif no_redact:
        click.echo("tapes: --no-redact changes nothing here: a stdio recording redacts only the JSON paths it is "
                   "given, and none are", err=True)
    if command:
        sys.exit(record_stdio(list(command), output, before_record=hook, rules=rules))

    from recorder.http import record_http

    address = _listen_address(listen)
    sys.exit(record_http(output, upstream=upstream, listen=address, rules=rules, confdir=ca_dir,
                         upstream_ca=upstream_ca, before_record=hook, until_stdin_closes=until_stdin_closes))


def _redaction_rules(config: Any, headers: tuple[str, ...] = (), paths: tuple[str, ...] = (),
                     no_redact: bool = False) -> Any:
    """The redaction rules of a recording: the defaults, [tool.tapes] redact-headers/redact-paths
    and the flags' own; none at all under --no-redact."""
    from tapes.cassette.redact import RedactionRuleError, RedactionRules

    if no_redact:
        return RedactionRules.none()
    try:
        return RedactionRules.default((*config.redact_headers, *headers), (*config.redact_paths, *paths))
    except RedactionRuleError as error:
        raise UserError(str(error)) from None


@main.command()
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.option(
    "--allow-unmatched", is_flag=True, help="Exit 0 even when a client message matched nothing in the cassette."
)
@click.option("--http", "over_http", is_flag=True, help="Be the recorded server over HTTP instead of stdio.")
@click.option("--listen", metavar="HOST:PORT", help="Where --http listens (default 127.0.0.1:8080).")
@click.option("--allow-origin", "allowed_hosts", multiple=True, metavar="HOST", help="Also accept this host in Origin and Host headers.")
@click.option("--drop-after", multiple=True, metavar="CHANNEL:N", help="Cut the connection after event N (http:9:2).")
@click.option("--delay", multiple=True, metavar="CHANNEL:N:SECONDS", help="Wait before sending event N.")
@click.option("--malformed", multiple=True, metavar="CHANNEL:N", help="Send a malformed event after event N.")
@click.option("--session-404", "missing_sessions", multiple=True, metavar="ID", help="Answer 404 to this session.")
@click.option("--match", metavar="NAME", help="Matcher: default, exact, method, params-subset, or a predicate "
              "(recorded, live) -> bool named module:function or path/to/file.py:function.")
@click.option("--ignore", multiple=True, metavar="POINTER", help="Also ignore this JSON pointer in params (/a/b).")
@click.option("--race", type=click.Choice([r.value for r in Race]), help="Who wins a cancellation race.")
@click.option("--repeats", type=click.Choice([r.value for r in Repeats]), help="What repeated requests get.")
@click.option("--polls", type=click.Choice([p.value for p in Polls]), help="Repeated polls (tasks/get): latest "
              "answers each with the state the recording had reached (default); exact wants the recorded count.")
@click.option("--timing", metavar="instant|recorded|FACTOR", help="Wait the recorded gaps (scaled by FACTOR).")
@click.option("--fault", "faults", multiple=True, metavar="TARGET:ACTION[:ARGS]",
              help="In place of a request's recorded answer: error:CODE:MESSAGE, delay:SECONDS, hang, malformed or "
              "drop; TARGET is METHOD[@NAME][#N] (e.g. 'tools/call@get_forecast#2:error:-32000:rate limited').")
@click.option("--dry-run", is_flag=True, help="Serve nothing: list the recorded request each --fault would take if "
              "the client repeated the recorded session (exit 1 if one would never fire).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path), help="Write the summary as JSON.")
@click.option("--new-episodes", is_flag=True, help="On the first miss, hand the session to the real server "
              "(-- COMMAND, or --upstream URL with --http) and add what it says to the cassette.")
@click.option("--upstream", metavar="URL", help="With --http: the real server, for --new-episodes or --record-mode.")
@click.option("--before-record", metavar="MODULE:FUNCTION", help="The hook the cassette was scrubbed with: live "
              "messages pass through it before they are matched, and so do new frames when recording.")
@click.option("--record-mode", type=click.Choice(RECORD_MODES), envvar="TAPES_RECORD_MODE", show_envvar=True,
              help="As the pytest plugin's: none replays only; once records (through the real server: -- COMMAND, "
              "or --upstream URL with --http) when the cassette is missing, else replays; new_episodes is "
              "--new-episodes; all (or rewrite) always records, and leaves the cassette as it was when the new "
              "recording behaves the same.")
@click.option("--redact-header", "redact_headers", multiple=True, metavar="NAME",
              help="When recording (--record-mode, --new-episodes): also redact this header.")
@click.option("--redact-path", "redact_paths", multiple=True, metavar="PATH",
              help="When recording (--record-mode, --new-episodes): redact this JSON path in messages (a.b.*.c).")
@click.argument("server_command", nargs=-1, type=click.UNPROCESSED)
def replay(
    cassette: str,
    allow_unmatched: bool,
    over_http: bool,
    listen: str | None,
    allowed_hosts: tuple[str, ...],
    drop_after: tuple[str, ...],
    delay: tuple[str, ...],
    malformed: tuple[str, ...],
    missing_sessions: tuple[str, ...],
    match: str | None,
    ignore: tuple[str, ...],
    race: str | None,
    repeats: str | None,
    polls: str | None,
    timing: str | None,
    faults: tuple[str, ...],
    dry_run: bool,
    report_path: Path | None,
    new_episodes: bool,
    upstream: str | None,
    before_record: str | None,
    record_mode: str | None,
    redact_headers: tuple[str, ...],
    redact_paths: tuple[str, ...],
    server_command: tuple[str, ...],
) -> None:
    """Be the recorded server: on stdin/stdout, or over HTTP with --http (Ctrl-C ends it).

    \b
    stdio:  tapes replay FILE                                (where the client expects the server command)
    HTTP:   tapes replay FILE --http [--listen HOST:PORT]   (point the client at the printed URL)
    New episodes:  tapes replay FILE --new-episodes -- python server.py
                   tapes replay FILE --http --new-episodes --upstream http://127.0.0.1:3001/mcp
    Record modes:  tapes replay FILE --record-mode once -- python server.py   (or TAPES_RECORD_MODE=once)
    Faults (HTTP): a CHANNEL is a recorded exchange (http:N, see `tapes show`), N an SSE event's number on it.
    """
    from tapes.cassette.store import Cassette, CassetteStream, load, stream
    from tapes.config import load_config
    from tapes.replay.control import ReplayControl

    # flags over [tool.tapes] over the defaults
    config = load_config()
    settings = config.control_settings()
    given = {"match": match, "race": race, "repeats": repeats, "polls": polls, "timing": timing}
    settings.update({name: value for name, value in given.items() if value is not None})
    settings["ignore"] = (*settings["ignore"], *ignore)
    settings["faults"] = (*settings["faults"], *faults)
    control = ReplayControl.build(**settings, before_record=before_record or config.before_record)
    if dry_run:
        _fault_dry_run(cassette, control.faults)
    if report_path is not None:  # said now, not once the client is gone
        if not report_path.parent.is_dir():
            raise UserError(f"--report {report_path}: the folder {report_path.parent} does not exist")
        _refuse_the_cassette_itself(report_path, cassette, f"--report {report_path}", "the report needs a file of its own")
    http_only = {"--listen": listen, "--allow-origin": allowed_hosts, "--drop-after": drop_after,
                 "--delay": delay, "--malformed": malformed, "--session-404": missing_sessions}
    real_server = upstream if over_http else server_command
    if upstream is not None:
        from tapes.wire.http import upstream_url

        upstream_url(upstream)  # said now, not when the session is handed over
    if record_mode is None and (server_command or upstream):  # [tool.tapes] record-mode, where the real server is named
        record_mode = config.record_mode
    new_episodes = new_episodes or record_mode == "new_episodes"
    if (redact_headers or redact_paths) and not (record_mode or new_episodes):  # `none`: the same command line
        raise UserError("--redact-header and --redact-path apply to what is recorded: add --record-mode or "
                        "--new-episodes")
    if redact_headers and not over_http:
        raise UserError("--redact-header only applies to an HTTP recording (stdio has no headers; --redact-path "
                        "applies to both)")
    rules = _redaction_rules(config, redact_headers, redact_paths)
    if record_mode in ("once", "all", "rewrite"):
        if not real_server or (over_http and server_command):
            raise UserError(f"--record-mode {record_mode} needs the real server: its command after -- (stdio) or "
                            "--upstream URL (--http)")
        if record_mode != "once" or not Path(cassette).exists():
            _record_in_place_of_replay(cassette, upstream if over_http else None, list(server_command), listen,
                                       before_record, rules)
    if record_mode in ("once", "all", "rewrite", "none"):
        # the cassette answers; the real server (one command line for every mode: only
        # TAPES_RECORD_MODE changes) stays unused
        real_server = None
        upstream, server_command = None, ()
    if new_episodes != bool(real_server) or (over_http and server_command):
        raise UserError("--new-episodes needs the real server: its command after -- (stdio) or --upstream URL "
                        "(--http), and neither applies without --new-episodes")
    from tapes.replay.episodes import NewEpisodes

    record_flags = [*(["--before-record", before_record] if before_record else []),
                    *(flag for name in redact_headers for flag in ("--redact-header", name)),
                    *(flag for path in redact_paths for flag in ("--redact-path", path))]
    if not over_http:
        if used := [flag for flag, value in {**http_only, "--upstream": upstream}.items() if value]:
            raise UserError(f"{used[0]} only applies to an HTTP replay: add --http")
        from replayer.stdio import replay_stdio
        from tapes.replay.sessions import served_over_stdio

        plan = None
        if new_episodes:
            plan = NewEpisodes(list(server_command), Path(cassette), record_flags)
        # read as the replay goes, so a big cassette answers at once; new episodes splice it: loaded
        loaded: Cassette | CassetteStream = load(cassette) if plan else stream(cassette)
        if loaded.header.transport != "stdio":
            if plan:
                raise UserError(f"{cassette} was recorded over HTTP: new episodes of it need --http and --upstream URL")
            if isinstance(loaded, CassetteStream):
                loaded.close()
            loaded = served_over_stdio(load(cassette), cassette)
        with _naming(cassette):
            code = replay_stdio(loaded, strict=not allow_unmatched, control=control, report_path=report_path,
                                new_episodes=plan)
        sys.exit(code)
    from replayer.http import ReplayOptions, replay_http
    from tapes.replay.streams import Faults

    host, port = _listen_address(listen or "127.0.0.1:8080")
    faults = Faults.from_options(drop_after, delay, malformed, missing_sessions)
    options = ReplayOptions(faults=faults, allowed_hosts=allowed_hosts, control=control)
    if upstream:
        options.new_episodes = NewEpisodes(upstream, Path(cassette), record_flags)
    with _naming(cassette):
        # read as it is served, so a big cassette answers at once; new episodes splice it: loaded
        loaded = load(cassette) if options.new_episodes else stream(cassette)
        code = replay_http(loaded, host, port, options=options, strict=not allow_unmatched, report_path=report_path)
    sys.exit(code)


def _fault_dry_run(cassette: str, faults: tuple[str, ...]) -> NoReturn:
    from tapes.replay.faults import dry_run

    if not faults:
        raise UserError("--dry-run lists where faults would fire: give at least one --fault (or faults in [tool.tapes])")
    hits = dry_run(faults, _load(cassette).frames)
    several = len({hit.session for hit in hits if hit.request}) > 1  # name the session only if it tells them apart
    for hit in hits:
        where = f"session {hit.session}: " if several else ""
        click.echo(f"{where}{hit.spec} -> {hit.request or 'no recorded request: it would never fire'}")
    sys.exit(int(any(hit.request is None for hit in hits)))


def _record_in_place_of_replay(cassette: str, upstream: str | None, command: list[str], listen: str | None,
                               before_record: str | None, rules: Any) -> NoReturn:
    """`tapes replay --record-mode once|all|rewrite` with a cassette to (re)make: record it instead,
    as `tapes record` would, where the replay would have served. The recording goes beside the
    cassette first, and takes its place only once the recorder finished, and, for a re-record,
    only if it behaves otherwise (`tapes.analysis.rerecord`): a run killed part way (a CI
    timeout) leaves no half cassette at the name for the next run to replay."""
    from tapes.analysis.rerecord import finished, scratch_beside, settle
    from tapes.cassette.scrub import load_hook
    from tapes.config import load_config

    hook_spec = before_record or load_config().before_record
    hook = load_hook(hook_spec) if hook_spec else None
    path = Path(cassette)
    if not path.parent.is_dir():  # said of the cassette, not of the scratch the recorder would fail to open
        raise UserError(f"{cassette}: cannot be written (the folder {path.parent} does not exist)")
    recording = scratch_beside(path, "recording")
    if upstream is None:
        from recorder.stdio import record_stdio

        # its exit code is the server's, recorded as any other end: a recorder that failed leaves its raw capture
        code = record_stdio(command, str(recording), before_record=hook, rules=rules)
        ended_well = True
    else:
        from recorder.http import record_http

        code = record_http(str(recording), upstream=upstream, listen=_listen_address(listen or "127.0.0.1:8080"),
                           rules=rules, before_record=hook)
        ended_well = code == 0  # else the cassette could not be written whole
    if ended_well and finished(recording):
        settle(recording, path)
    elif recording.exists():
        _warn([(f"the recording did not finish, so it was not put at {path}; what was recorded is kept in {recording}, "
                "which the next recording writes over")])
    sys.exit(code)


@main.command()
@click.argument("cassette", type=click.Path(dir_okay=False))
# at most what a screen could show: a table a billion columns wide took gigabytes and minutes to lay out
@click.option("--width", type=click.IntRange(min=1, max=10_000), default=None,
              help="Width of the table (default: the terminal's).")
def show(cassette: str, width: int | None) -> None:
    """Print a cassette as a timeline."""
    from tapes.cassette.store import stream
    from tapes.render.show import print_frames

    with stream(cassette) as frames:  # rows are printed as the frames are read
        print_frames(frames.header, frames, lambda: frames.warnings, width=width)
    if not sys.stdout.isatty():  # the timeline shows them; written to a file or a pipe, the terminal hears them too
        _warn(frames.warnings)


_CASSETTE_FORMATS = click.Choice(["jsonl", "msgpack"])


def _write_cassette(cassette: Any, output: str, output_format: str | None, default: str) -> None:
    """Write to the file `output` in the format its name says (NAME.jsonl, NAME.tape; otherwise
    `default`), or to stdout for `-`; an explicit `output_format` wins."""
    from tapes.cassette.store import JSONL_SUFFIX, STDOUT, dump, replacing, save

    if output_format is None:
        output_format = "jsonl" if output.endswith(JSONL_SUFFIX) else "msgpack" if output.endswith(".tape") else default
    if output != STDOUT:
        # beside it first: a cassette that cannot be written in this format leaves no half file, nor an emptied old one
        replacing(output, lambda scratch: save(cassette, scratch, jsonl=output_format == "jsonl", name=output))
        return
    try:
        dump(cassette, sys.stdout.buffer, jsonl=output_format == "jsonl", name="stdout")
    except BrokenPipeError:
        # The reader went away (`| head`, a pager that quit): nothing more to say, and nowhere to say
        # it; the output is cut short, so exit 1, as click ends every other command whose reader left.
        _discard_stdout()
        sys.exit(1)


@main.command("export")
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="File to write (- for stdout).")
@click.option("--format", "output_format", type=click.Choice(["jsonl", "msgpack", "har"]),
              help="jsonl: the cassette's JSON Lines twin (for review in git); msgpack; har: an HTTP cassette as "
              "HAR 1.2. Default: as the output's name says (NAME.tape is msgpack, NAME.har HAR), else jsonl.")
def export(cassette: str, output: str, output_format: str | None) -> None:
    """Convert a cassette to its JSON Lines twin, or an HTTP cassette to a HAR 1.2 log. `-o -`
    writes to stdout, e.g. as a git textconv: `tapes export --format jsonl -o -`."""

    if output_format is None and output.endswith(".har"):
        output_format = "har"
    if output_format != "har":
        with _converting(cassette):
            _write_cassette(_load(cassette), output, output_format, default="jsonl")
        return
    from tapes.render.har import har_text

    text = har_text(_load(cassette), cassette)
    try:
        with click.open_file(output, "wb") as out:
            out.write(text)
    except OSError as error:
        raise UserError(f"{output}: cannot be written ({error.strerror})") from None


@main.command()
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="Cassette to write (NAME.jsonl: JSON Lines; otherwise msgpack; - for stdout as JSON Lines). "
              "May be CASSETTE itself.")
@click.option("--redact-header", "redact_headers", multiple=True, metavar="NAME", help="Also redact this header.")
@click.option(
    "--redact-path", "redact_paths", multiple=True, metavar="PATH", help="Redact this JSON path in messages (a.b.*.c)."
)
@click.option("--before-record", metavar="MODULE:FUNCTION", help="Pass every frame through this function too.")
def redact(cassette: str, output: str, redact_headers: tuple[str, ...], redact_paths: tuple[str, ...],
           before_record: str | None) -> None:
    """Apply the default redaction rules (and these) to a recorded cassette; list what was replaced."""
    from tapes.cassette.post_redact import redact_cassette
    from tapes.cassette.redact import RedactionRuleError, RedactionRules, Redactor
    from tapes.cassette.scrub import load_hook
    from tapes.cassette.store import STDOUT, replace_file

    try:
        rules = RedactionRules.default(redact_headers, redact_paths)
    except RedactionRuleError as error:
        raise UserError(str(error)) from None
    hook = load_hook(before_record) if before_record else None
    redacted, replaced = redact_cassette(_load(cassette), Redactor(rules), hook)
    if output == STDOUT:
        _write_cassette(redacted, output, None, default="jsonl")
    else:
        replace_file(redacted, output)  # -o CASSETTE never leaves half a file
    to_stderr = _is_stdout(output)  # the cassette is stdout's: what was replaced goes to stderr
    click.echo(f"tapes redact: wrote {'stdout' if output == STDOUT else output}" + ("" if replaced else " (nothing to replace)"),
               err=to_stderr)
    for entry in replaced:
        click.echo(f"  {entry.describe()}", err=to_stderr)


@main.command("import")
@click.argument("jsonl", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="File to write (- for stdout).")
@click.option("--format", "output_format", type=_CASSETTE_FORMATS,
              help="Default: as the output's name says (NAME.jsonl is JSON Lines), else msgpack.")
def import_jsonl(jsonl: str, output: str, output_format: str | None) -> None:
    """Convert a JSON Lines cassette back to msgpack."""

    with _converting(jsonl):
        _write_cassette(_load(jsonl), output, output_format, default="msgpack")


# --- analysis: diff, verify, lint -----------------------------------------------------------------

_FORMATS = click.Choice(["text", "json", "markdown"])


def _noise(noise_rules: tuple[str, ...], ignore: tuple[str, ...]) -> Any:
    from tapes.analysis.normalize import NOISE_RULES, Noise

    try:
        return Noise(rules=noise_rules or tuple(NOISE_RULES), ignore=ignore)
    except ValueError as error:
        raise UserError(str(error)) from None


def _noise_options(command: Any) -> Any:
    command = click.option("--ignore", multiple=True, metavar="POINTER",
                           help="Also ignore this JSON pointer in every interaction (* matches any member), "
                                "e.g. /outcome/result/content/*/text.")(command)
    return click.option("--noise", "noise_rules", multiple=True, metavar="RULE",
                        help="Noise rules to apply (default: all of meta, uuids, timestamps).")(command)


def _emit_diff(report: Any, output_format: str, fail_on: str, accepted: bool = False) -> None:
    """Print the report and exit with its code (0 when the user accepted the new session)."""
    import json

    from rich.console import Console

    from tapes.analysis.diff import markdown, print_report

    if output_format == "json":
        click.echo(json.dumps(report.to_json(), indent=2, ensure_ascii=False, default=str))
    elif output_format == "markdown":
        click.echo(markdown(report))
    else:
        print_report(report, Console(soft_wrap=True))
    sys.exit(0 if accepted else report.exit_code(fail_on))


@main.command()
@click.argument("old", type=click.Path(dir_okay=False))
@click.argument("new", type=click.Path(dir_okay=False))
@click.option("--format", "output_format", type=click.Choice([*_FORMATS.choices, "html"]), default="text",
              show_default=True, help="html: the two sessions side by side as a page (see tapes view).")
@click.option("--fail-on", type=click.Choice(["any", "breaking"]), default="any", show_default=True,
              help="Exit 1 on any difference, or only on breaking ones.")
@_noise_options
def diff(old: str, new: str, output_format: str, fail_on: str, noise_rules: tuple[str, ...], ignore: tuple[str, ...]) -> None:
    """Compare two sessions by behaviour, also across protocol versions (exit 0 same, 1 different, 2 error)."""
    from tapes.analysis.diff import diff_cassettes

    old_cassette, new_cassette = _load(old), _load(new)
    report = diff_cassettes(old_cassette, new_cassette, old_name=old, new_name=new, noise=_noise(noise_rules, ignore))
    if output_format == "html":
        from tapes.render.view import render_diff

        click.echo(render_diff(report, old_cassette, new_cassette))
        sys.exit(report.exit_code(fail_on))
    _emit_diff(report, output_format, fail_on)


@main.command()
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("--upstream", metavar="URL",
              help="Verify the HTTP server at this URL (Streamable HTTP or legacy SSE) against an HTTP recording.")
@click.option("--keep", type=click.Path(dir_okay=False), help="Keep the new recording in this file.")
@click.option("--step-timeout", type=float, default=5.0, show_default=True,
              help="Seconds to wait for what the next client message depends on.")
@click.option("--format", "output_format", type=_FORMATS, default="text", show_default=True)
@click.option("--fail-on", type=click.Choice(["any", "breaking"]), default="any", show_default=True)
@click.option("--update", is_flag=True,
              help="Accept the live session: when it differs, rewrite CASSETTE with it (same format) and exit 0.")
@_noise_options
def verify(cassette: str, command: tuple[str, ...], upstream: str | None, keep: str | None, step_timeout: float,
           output_format: str, fail_on: str, update: bool, noise_rules: tuple[str, ...], ignore: tuple[str, ...]) -> None:
    """Replay a recording's client side against a live server and diff the new session with it.

    \b
    stdio:  tapes verify FILE [OPTIONS] -- SERVER COMMAND...
    HTTP:   tapes verify FILE --upstream URL [OPTIONS]
    (exit 0 same, 1 different, 2 error)
    """
    import tempfile
    from pathlib import Path

    from tapes.analysis.diff import diff_cassettes

    from tapes.replay.outcomes import LONGEST_WAIT

    if not 0 <= step_timeout <= LONGEST_WAIT:  # NaN too: waits take none of these
        raise UserError(f"--step-timeout {step_timeout} is not a number of seconds from 0 to {LONGEST_WAIT:.0f} (24 days)")
    if keep:
        _refuse_the_cassette_itself(Path(keep), cassette, f"--keep {keep}", "use --update to replace it")
    if upstream is not None and command:
        raise UserError("verify takes either --upstream URL or a server command after --, not both")
    if upstream is None and not command:
        raise UserError("verify needs the server command after -- (or --upstream URL for an HTTP server)")
    recording = _load(cassette)
    if upstream is None and recording.header.transport != "stdio":
        raise UserError(f"{cassette}: is an HTTP recording; verify it against a server URL with --upstream URL")
    if upstream is not None and recording.header.transport != "http":
        raise UserError(f"{cassette}: is a stdio recording; verify it against a server command after --")
    noise = _noise(noise_rules, ignore)
    from recorder.verify import verify_http, verify_stdio

    with _signals_unwind(), tempfile.TemporaryDirectory(prefix="tapes-verify-") as scratch:
        output = Path(keep) if keep else Path(scratch) / "live.tape"
        with _naming(cassette):
            if upstream is not None:
                live = verify_http(recording, upstream, output, step_timeout=step_timeout)
            else:
                live = verify_stdio(recording, list(command), output, step_timeout=step_timeout)
    from tapes.analysis.verify import silent_server

    if (silent := silent_server(recording.frames, live.frames)) is not None:  # a server that did not start
        kept = f" ({cassette} is left as it is)" if update else ""
        raise UserError(f"the live server answered nothing, so nothing was compared{kept}" + (f": {silent}" if silent else ""))
    report = diff_cassettes(recording, live, old_name=cassette, new_name="live server", noise=noise)
    accepted = update and report.exit_code("any") != 0
    if accepted:
        from tapes.cassette.store import is_jsonl_file, replacing, save

        jsonl = is_jsonl_file(cassette)  # in the form it has, whatever its name says
        replacing(cassette, lambda out: save(live, out, jsonl=jsonl, name=cassette))
        click.echo(f"tapes verify: updated {cassette} to the live session", err=True)
    elif update:
        click.echo(f"tapes verify: {cassette} already matches the live session; left as it is", err=True)
    _emit_diff(report, output_format, fail_on, accepted)


@main.command()
@click.argument("cassettes", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--format", "output_format", type=click.Choice(["text", "json", "github", "sarif"]), default="text",
              show_default=True, help="github: workflow annotations; sarif: SARIF 2.1.0 (code scanning).")
@click.option("--security", is_flag=True, help="Also check the tool, prompt and resource surface and look for secrets.")
@click.option("--baseline", type=click.Path(dir_okay=False),
              help="With --security: report tools whose description or input schema changed since this cassette.")
def lint(cassettes: tuple[str, ...], output_format: str, security: bool, baseline: str | None) -> None:
    """Check cassettes against the rules of their negotiated protocol version (exit 0 clean, 1 findings, 2 error)."""
    import json

    from tapes.analysis.lint import RULES
    from tapes.analysis.lint import lint as lint_cassette
    from tapes.cassette.store import is_jsonl_file
    from tapes.wire.text import printable, terminal_line

    if baseline and not security:
        raise UserError("--baseline only applies with --security")
    rules = dict(RULES)
    old = None
    if security:
        from tapes.analysis.security import SECURITY_RULES, security_lint

        rules |= SECURITY_RULES
        old = _load(baseline) if baseline else None
    results = {}
    unreadable = False
    for path in cassettes:
        try:
            cassette = _load(path)
        except UserError as error:  # said in its one sentence; the other cassettes are still linted
            click.echo(f"{ERROR_PREFIX}{error}", err=True)
            unreadable = True
            continue
        findings = lint_cassette(cassette) + (security_lint(cassette, old) if security else [])
        results[path] = (cassette, sorted(findings, key=lambda finding: (finding.seq, finding.rule)))
    if not results:
        sys.exit(2)  # none could be read: no empty report in their place
    if output_format in ("github", "sarif"):
        from tapes.analysis.report import github_annotations, sarif

        located = {path: (cassette.frames, findings, is_jsonl_file(path))  # JSON Lines: lines
                   for path, (cassette, findings) in results.items()}
        if output_format == "github":
            click.echo("\n".join(github_annotations(located, rules)))
        else:
            click.echo(json.dumps(sarif(located, rules), indent=2, ensure_ascii=False))
    elif output_format == "json":
        click.echo(json.dumps({path: {"protocol": cassette.protocol_version,
                                      "findings": [{"frame": f.seq, "rule": f.rule, "message": f.message,
                                                    "rule_text": rules[f.rule]} for f in findings]}
                               for path, (cassette, findings) in results.items()}, indent=2, ensure_ascii=False, default=str))
    else:
        for path, (cassette, findings) in results.items():
            era = cassette.protocol_version
            click.echo(printable(f"{path} ({era or 'unknown protocol'}): {len(findings) or 'no'} finding"
                                 f"{'s' * (len(findings) != 1)}"))
            for finding in findings:
                click.echo(f"  {terminal_line(finding.describe())}")
    sys.exit(2 if unreadable else int(any(findings for _, findings in results.values())))


# --- end of analysis: diff, verify, lint ------------------------------------------------------------


@main.command()
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True),
              help="HTML file to write (default: NAME.html here; - for stdout).")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default browser.")
def view(cassette: str, output: str | None, open_browser: bool) -> None:
    """Write a cassette as a self-contained HTML page: a sequence diagram of the session."""
    import webbrowser
    from pathlib import Path

    from tapes.cassette.store import replacing, stream
    from tapes.render.view import Side, write_page

    if output == "-" and open_browser:
        raise UserError("--open needs a file to open: leave out -o - or name a file")
    title = Path(cassette).name
    with stream(cassette) as frames:  # the page is written as the frames are read
        side = Side.of_stream(frames, cassette, title)
        if output == "-":
            write_page(sys.stdout.buffer, title, [side])
            _warn(frames.warnings)
            return
        target = Path(output or Path(cassette).with_suffix(".html").name)
        _refuse_the_cassette_itself(target, cassette, f"-o {target}", "the page needs a file of its own")

        def write(name: str) -> None:
            with open(name, "wb") as out:
                write_page(out, title, [side])

        try:  # beside it, then renamed: a damaged cassette or a Ctrl-C leaves the page there was
            replacing(target, write)
        except OSError as error:
            raise UserError(f"{target}: cannot be written ({error.strerror})") from None
    _warn(frames.warnings)  # known once the whole cassette is read (the page shows them too)
    click.echo(f"tapes view: wrote {target}", err=True)
    if open_browser:
        webbrowser.open(target.resolve().as_uri())
