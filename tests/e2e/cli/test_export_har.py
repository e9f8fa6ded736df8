"""`tapes export --format har`: the committed HTTP cassettes as HAR 1.2, checked field by field
against what the HAR 1.2 spec requires (http://www.softwareishard.com/blog/har-12-spec/)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from tapes.cassette.frames import Kind
from tapes.cassette.store import load
from tapes.cli import main
from tapes.wire.sse import SSEParser

from tests.support.paths import CASSETTES

HTTP_CASSETTES = ["everything-http-2025-11-25.tape", "everything-sse-2024-11-05.tape"]


def export(name: str) -> dict:
    result = CliRunner().invoke(main, ["export", str(CASSETTES / name), "--format", "har", "-o", "-"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def check_fields(value: dict, required: dict[str, type | tuple[type, ...]], where: str) -> None:
    for name, kind in required.items():
        assert name in value, f"{where} has no {name}"
        assert isinstance(value[name], kind), f"{where}.{name} is {type(value[name]).__name__}, not {kind}"


def check_name_values(values: list, where: str) -> None:
    for item in values:
        check_fields(item, {"name": str, "value": str}, where)


NUMBER = (int, float)


@pytest.mark.parametrize("name", HTTP_CASSETTES)
def test_every_field_har_1_2_requires_is_there_with_its_type(name: str) -> None:
    log = export(name)["log"]
    check_fields(log, {"version": str, "creator": dict, "entries": list}, "log")
    assert log["version"] == "1.2"
    check_fields(log["creator"], {"name": str, "version": str}, "log.creator")
    assert log["entries"]
    for index, entry in enumerate(log["entries"]):
        where = f"entries[{index}]"
        check_fields(entry, {"startedDateTime": str, "time": NUMBER, "request": dict, "response": dict,
                             "cache": dict, "timings": dict}, where)
        assert datetime.fromisoformat(entry["startedDateTime"]).tzinfo is not None  # ISO 8601 with a zone
        request, response, timings = entry["request"], entry["response"], entry["timings"]
        check_fields(request, {"method": str, "url": str, "httpVersion": str, "cookies": list, "headers": list,
                               "queryString": list, "headersSize": int, "bodySize": int}, f"{where}.request")
        assert request["url"].startswith("http://127.0.0.1:3001/")
        check_name_values(request["headers"] + request["queryString"], f"{where}.request")
        if "postData" in request:
            check_fields(request["postData"], {"mimeType": str, "text": str}, f"{where}.request.postData")
        check_fields(response, {"status": int, "statusText": str, "httpVersion": str, "cookies": list,
                                "headers": list, "content": dict, "redirectURL": str, "headersSize": int,
                                "bodySize": int}, f"{where}.response")
        check_name_values(response["headers"], f"{where}.response")
        check_fields(response["content"], {"size": int, "mimeType": str}, f"{where}.response.content")
        check_fields(timings, {"send": NUMBER, "wait": NUMBER, "receive": NUMBER}, f"{where}.timings")
        assert all(timings[phase] >= 0 for phase in ("send", "wait", "receive"))
        assert entry["time"] == pytest.approx(timings["send"] + timings["wait"] + timings["receive"])


@pytest.mark.parametrize("name", HTTP_CASSETTES)
def test_every_exchange_is_an_entry_with_its_recorded_bodies(name: str) -> None:
    cassette = load(CASSETTES / name)
    entries = export(name)["log"]["entries"]
    requests = [f for f in cassette.frames if f.kind is Kind.HTTP_REQUEST]
    assert [e["request"]["method"] for e in entries] == [f.info["method"] for f in requests]
    assert [e["comment"].split(",")[0] for e in entries] == [f.channel for f in requests]
    for entry, head in zip(entries, requests):
        on_channel = [f for f in cassette.frames if f.channel == head.channel]
        posted = [f for f in on_channel if f.from_client and f.kind is Kind.MESSAGE]
        if posted:
            assert json.loads(entry["request"]["postData"]["text"]) == posted[0].message
        events = [f for f in on_channel if f.kind is Kind.SSE_EVENT]
        if events:  # an SSE body is its event stream as text: parsing it gives back the recorded events
            parsed = SSEParser().feed(entry["response"]["content"]["text"].encode())
            assert [(e.id, e.event, e.data) for e in parsed] == [
                (f.info["id"], f.info["event"], f.payload.decode()) for f in events]
        response = next(f for f in on_channel if f.kind is Kind.HTTP_RESPONSE)
        assert entry["response"]["status"] == response.info["status"]
        assert entry["timings"]["wait"] == pytest.approx((response.t - head.t) * 1000, abs=0.001)


def test_a_stdio_cassette_is_refused_in_one_sentence(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["export", str(CASSETTES / "notes-stdio-2025-11-25.tape"),
                                       "--format", "har", "-o", str(tmp_path / "x.har")])
    assert result.exit_code == 2
    assert "is a stdio recording; HAR holds HTTP exchanges only" in result.output
    assert not (tmp_path / "x.har").exists()
