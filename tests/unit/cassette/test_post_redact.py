"""redact_cassette: the record-time redaction applied to an existing cassette."""

from __future__ import annotations

from tapes.cassette.frames import Direction, Frame, Kind
from tapes.cassette.post_redact import redact_cassette
from tapes.cassette.redact import RedactionRules, Redactor
from tapes.cassette.scrub import hook_label
from tapes.cassette.store import Cassette, Header

C2S, S2C = Direction.CLIENT_TO_SERVER, Direction.SERVER_TO_CLIENT


def cassette(*frames: Frame) -> Cassette:
    return Cassette(Header(transport="http", server={"url": "http://127.0.0.1:1/mcp"},
                           redaction=("header:authorization",)), list(frames))


def request_head(seq: int, *headers: tuple[str, str]) -> Frame:
    return Frame(seq, 0.0, C2S, f"http:{seq}", Kind.HTTP_REQUEST,
                 info={"method": "POST", "path": "/mcp", "headers": [list(h) for h in headers]})


def test_placeholders_already_there_keep_their_numbers_and_new_secrets_get_the_next() -> None:
    recorded = cassette(request_head(1, ("Authorization", "<redacted:1>"), ("X-Tenant", "acme")),
                        request_head(2, ("Authorization", "<redacted:1>"), ("X-Tenant", "acme")))
    redacted, replaced = redact_cassette(recorded, Redactor(RedactionRules.default(["X-Tenant"])))
    assert [f.info["headers"] for f in redacted.frames] == [[["Authorization", "<redacted:1>"], ["X-Tenant", "<redacted:2>"]]] * 2
    assert [entry.describe() for entry in replaced] == ["header X-Tenant: 2 frames (1, 2) -> <redacted:2>"]
    assert redacted.header.redaction[0] == "header:authorization" and "header:x-tenant" in redacted.header.redaction


def test_a_huge_placeholder_number_costs_nothing() -> None:
    # each number up to it was taught one by one: a cassette saying <redacted:999999999999> hung redact;
    # one too long for an integer was a ValueError
    recorded = cassette(request_head(1, ("X-Note", "<redacted:999999999999>"), ("X-Other", "<redacted:" + "9" * 5000 + ">"),
                                     ("X-Tenant", "acme")))
    redacted, _ = redact_cassette(recorded, Redactor(RedactionRules.default(["X-Tenant", "X-Note"])))
    assert redacted.frames[0].info["headers"] == [["X-Note", "<redacted:999999999999>"],
                                                  ["X-Other", "<redacted:" + "9" * 5000 + ">"],
                                                  ["X-Tenant", "<redacted:1000000000000>"]]


def test_a_redacted_sse_event_drops_its_verbatim_bytes() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"token": "s3cret"}}
    event = Frame(1, 0.0, S2C, "http:1", Kind.SSE_EVENT, message, b'{"id":1, "jsonrpc":"2.0","result":{"token":"s3cret"}}',
                  {"id": "1", "event": "message", "retry": None})
    redacted, replaced = redact_cassette(cassette(event), Redactor(RedactionRules.default(json_paths=["result.token"])))
    (frame,) = redacted.frames
    assert frame.data is None and b"s3cret" not in frame.payload and frame.info == event.info
    assert [entry.describe() for entry in replaced] == ["json result.token: 1 frame (1) -> <redacted:1>"]


def drop_stderr_and_mask_passwords(frame: Frame) -> Frame | None:
    if frame.kind is Kind.STDERR:
        return None
    return Frame(frame.seq, frame.t, frame.direction, frame.channel, frame.kind, None, frame.data.replace(b"pw=1", b"pw=*"))


def test_the_hook_sees_every_frame_and_what_it_changed_or_dropped_is_listed() -> None:
    hook = drop_stderr_and_mask_passwords
    recorded = Cassette(Header(transport="stdio", server={"command": ["x"]}), [
        Frame(1, 0.0, S2C, "stdio", Kind.STDERR, data=b"starting"),
        Frame(2, 0.0, S2C, "stdio", Kind.RAW, data=b"pw=1"),
        Frame(3, 0.0, S2C, "stdio", Kind.RAW, data=b"fine"),
    ])
    redacted, replaced = redact_cassette(recorded, Redactor(RedactionRules.default()), hook)
    assert [f.data for f in redacted.frames] == [b"pw=*", b"fine"]
    assert [entry.describe() for entry in replaced] == [f"{hook_label(hook)} (dropped): 1 frame (1)",
                                                        f"{hook_label(hook)} (changed): 1 frame (2)"]
    assert redacted.header.redaction[-1] == hook_label(hook)


def test_oauth_secrets_in_bodies_and_request_queries_are_redacted_as_at_record_time() -> None:
    """A cassette recorded with --no-redact: the authorization redirect's code, the token request's
    form and the token answer's JSON lose their secrets; the rest of each body stays as it was."""
    form = ("application/x-www-form-urlencoded", b"grant_type=authorization_code&code=c0de-1&code_verifier=v3rifier"
            b"&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcallback")
    token = ("application/json", b'{"access_token":"at-secret","token_type":"Bearer","expires_in":3600}')
    recorded = Cassette(Header(transport="http", server={"url": "http://127.0.0.1:1/mcp"}), [
        Frame(1, 0.0, C2S, "http:1", Kind.HTTP_REQUEST,
              info={"method": "GET", "path": "/callback?code=c0de-1&state=st", "headers": []}),
        Frame(2, 0.0, C2S, "http:2", Kind.HTTP_REQUEST,
              info={"method": "POST", "path": "/token", "headers": [["Content-Type", form[0]]]}),
        Frame(3, 0.0, C2S, "http:2", Kind.RAW, data=form[1]),
        Frame(4, 0.0, S2C, "http:2", Kind.HTTP_RESPONSE, info={"status": 200, "headers": [["content-type", token[0]]]}),
        Frame(5, 0.0, S2C, "http:2", Kind.RAW, data=token[1]),
        Frame(6, 0.0, S2C, "stdio", Kind.RAW, data=b"code=c0de-1"),  # not an HTTP body: left alone
    ])
    redacted, replaced = redact_cassette(recorded, Redactor(RedactionRules.default()))
    request, _, body, _, answer, line = redacted.frames
    assert request.info["path"] == "/callback?code=<redacted:1>&state=st"
    assert body.data == (b"grant_type=authorization_code&code=%3Credacted%3A1%3E&code_verifier=%3Credacted%3A2%3E"
                         b"&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcallback")
    assert answer.data == b'{"access_token":"<redacted:3>","token_type":"Bearer","expires_in":3600}'
    assert line.data == b"code=c0de-1"
    assert [entry.describe() for entry in replaced] == ["query: 1 frame (1) -> <redacted:1>",
                                                        "body: 2 frames (3, 5) -> <redacted:1>, <redacted:2>, <redacted:3>"]
    again, replaced = redact_cassette(redacted, Redactor(RedactionRules.default()))  # placeholders, percent-encoded too, stay
    assert (again.frames, replaced) == (redacted.frames, [])
