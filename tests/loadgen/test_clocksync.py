"""The sender's clock exchanges: pure parsing, then against a real receiver whose clock is
shifted by a known amount, so the truth the estimate must bracket is known."""

import time

import httpx
import pytest

from contract.records import RECEIVED_FIELDS
from evbench.instruments import start_receiver
from loadgen.clocksync import exchange_with, measure, parse_answer
from runtime.clocks import estimate
from runtime.parquet import read_parts

MS = 1_000_000
OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 38\r\n\r\n"
BODY = b'{"received_ns":100,"replied_ns":20000}'


@pytest.mark.parametrize(
    ("data", "stamps"),
    [
        (OK + BODY, (100, 20000)),
        (OK[:20], None),  # headers not complete yet
        (OK + BODY[:10], None),  # body not complete yet
        (OK.replace(b"Content-Length", b"content-length") + BODY, (100, 20000)),
    ],
)
def test_answers_are_parsed_once_complete(data, stamps):
    assert parse_answer(data) == stamps


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", "answered 'HTTP/1.1 404"),
        (b"HTTP/1.1 200 OK\r\n\r\n{}", "no Content-Length"),
        (OK.replace(b"38", b"2") + b"{}", "not a clock answer"),
        (OK.replace(b"38", b"9") + b"not json!", "not a clock answer"),
    ],
)
def test_what_is_not_a_clock_answer_says_so(data, error):
    with pytest.raises(ValueError, match=error):
        parse_answer(data)


@pytest.mark.e2e
@pytest.mark.parametrize("shift_ms", [0.0, 250.0, -40.0])
def test_the_estimate_brackets_the_receivers_known_shift(tmp_path, shift_ms):
    child, url = start_receiver(tmp_path / "rx", tmp_path / "rx.log", clock_shift_ms=shift_ms)
    try:
        before_ns = time.time_ns()
        posted = httpx.post(
            url,
            content=b"{}",
            headers={
                "ce-id": "e",
                "ce-evbenchid": "e",
                "ce-type": "t",
                "ce-source": "s",
                "ce-specversion": "1.0",
            },
        )
        after_ns = time.time_ns()
        assert posted.status_code == 202
        offset = estimate(exchange_with(f"{url}/clock", count=32))
    finally:
        assert child.stop() == 0
    shift_ns = round(shift_ms * MS)
    # The truth lies inside the bound, whatever the machine's speed.
    assert abs(offset.offset_ns - shift_ns) <= offset.bound_ns
    # And the bound resolves the skew: on loopback half a round trip is far below 25 ms.
    assert offset.bound_ns < 25 * MS
    assert (offset.exchanges, offset.kept) == (32, 8)
    # The records carry the same shifted clock as the endpoint.
    (row,) = read_parts(tmp_path / "rx", RECEIVED_FIELDS).to_pylist()
    assert before_ns + shift_ns <= row["received_ns"] <= after_ns + shift_ns


@pytest.mark.e2e
def test_an_unreachable_clock_is_reported_not_raised(tmp_path):
    child, url = start_receiver(tmp_path / "rx", tmp_path / "rx.log")
    assert child.stop() == 0  # its port is closed now
    offset, error = measure(f"{url}/clock")
    assert offset is None and "ConnectionRefusedError" in error
    assert measure("https://example.invalid/clock") == (
        None,
        "ValueError: the clock URL must be http://host:port/clock, not "
        "'https://example.invalid/clock'",
    )
