"""The `tapes` command. A composition root: it wires the core to the recorder and replayer
adapters, so it is the one module of `tapes` allowed to import them."""

from __future__ import annotations

import sys
from typing import Any

import click

from tapes import __version__
from tapes.errors import UserError


class _Group(click.Group):
    """Turns a UserError anywhere below into one line on stderr and exit code 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UserError as error:
            click.echo(f"tapes: error: {error}", err=True)
            ctx.exit(2)


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="tapes")
def main() -> None:
    """Record MCP sessions into cassettes and replay them as a deterministic mock server."""


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Cassette file to write.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def record(output: str, command: tuple[str, ...]) -> None:
    """Run the server COMMAND and record its stdio session: put `tapes record -o FILE --` in
    front of the server command where the client expects it."""
    from recorder.stdio import record_stdio

    sys.exit(record_stdio(list(command), output))


@main.command()
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.option(
    "--allow-unmatched", is_flag=True, help="Exit 0 even when a client message matched nothing in the cassette."
)
def replay(cassette: str, allow_unmatched: bool) -> None:
    """Be the recorded server on stdin/stdout."""
    from replayer.stdio import replay_stdio
    from tapes.cassette import load

    sys.exit(replay_stdio(load(cassette), strict=not allow_unmatched))


@main.command()
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.option("--width", type=int, default=None, help="Width of the table (default: the terminal's).")
def show(cassette: str, width: int | None) -> None:
    """Print a cassette as a timeline."""
    from tapes.cassette import load
    from tapes.show import print_timeline

    print_timeline(load(cassette), width=width)


@main.command("export")
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="JSON Lines file to write.")
def export_jsonl(cassette: str, output: str) -> None:
    """Convert a cassette to its JSON Lines twin (for review in git)."""
    from tapes.cassette import load, save

    save(load(cassette), output, jsonl=True)


@main.command("import")
@click.argument("jsonl", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Cassette file to write.")
def import_jsonl(jsonl: str, output: str) -> None:
    """Convert a JSON Lines cassette back to msgpack."""
    from tapes.cassette import load, save

    save(load(jsonl), output)
