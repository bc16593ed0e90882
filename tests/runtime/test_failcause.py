"""Send failures by cause (runtime.failcause): tables of what the sender records."""

import pytest

from contract.records import INFLIGHT_CAP_ERROR
from runtime.failcause import causes_text, failure_cause, is_wiring, wiring_cause, wiring_text

CAUSES = [
    (202, None, None),
    (200, None, None),  # a Kafka ack
    (502, "HTTP 502", "HTTP 502"),
    (404, "HTTP 404", "HTTP 404"),
    (0, INFLIGHT_CAP_ERROR, "in-flight cap"),
    (0, "connect: ConnectionRefusedError: [Errno 111] Connect call failed", "connection refused"),
    (0, "connect: no connection within 5 s", "no connection in time"),
    (0, "connect: gaierror: [Errno -2] Name or service not known", "connection failed"),
    (0, "no answer within the 30 s request timeout", "timeout"),
    (0, "no answer within the 10 s drain timeout", "timeout"),
    (0, "connection closed before the answer (ConnectionResetError: x)", "connection closed"),
    (0, "unreadable answer: bad status line", "unreadable answer"),
    (0, "Kafka _MSG_TIMED_OUT: Local: Message timed out", "Kafka _MSG_TIMED_OUT"),
    (0, "producer queue full (queue.buffering.max.messages)", "producer queue full"),
    (0, None, "other"),
    (0, "something new", "other"),
]


@pytest.mark.parametrize(("status", "error", "cause"), CAUSES)
def test_each_failure_has_one_cause(status, error, cause):
    assert failure_cause(status, error) == cause


@pytest.mark.parametrize(
    ("cause", "wiring"),
    [
        ("connection refused", True),
        ("connection failed", True),
        ("no connection in time", True),
        ("HTTP 404", True),
        ("HTTP 400", True),
        ("HTTP 502", True),
        ("HTTP 408", False),  # a timeout
        ("HTTP 429", False),  # a rate limit: load
        ("HTTP 503", False),
        ("HTTP 500", False),
        ("timeout", False),
        ("in-flight cap", False),
        ("connection closed", False),
        ("Kafka _UNKNOWN_TOPIC", True),
        ("Kafka _MSG_TIMED_OUT", False),
    ],
)
def test_what_says_wiring(cause, wiring):
    assert is_wiring(cause) is wiring


@pytest.mark.parametrize(
    ("counts", "ok", "failures", "expected"),
    [
        ({"connection refused": 150}, 0, 150, "connection refused"),
        ({"HTTP 404": 999, "timeout": 1}, 0, 1000, "HTTP 404"),  # nearly all
        ({"HTTP 404": 98, "timeout": 2}, 0, 100, None),  # not nearly all
        ({"connection refused": 99}, 0, 99, None),  # too few yet
        ({"connection refused": 500}, 1, 500, None),  # one got through: not wiring
        ({"timeout": 500}, 0, 500, None),  # load, or a system down: judged, not diagnosed
        ({"HTTP 503": 500}, 0, 500, None),
        # a target that never answers: its connects time out while the sender's cap fills
        ({"no connection in time": 300, "in-flight cap": 4000}, 0, 4300, "no connection in time"),
        ({}, 0, 0, None),
    ],
)
def test_a_first_step_failing_all_of_one_wiring_cause_is_wiring(counts, ok, failures, expected):
    assert wiring_cause(counts, ok, failures) == expected


def test_the_diagnosis_names_the_cause_the_url_and_what_to_check():
    text = wiring_text("connection refused", 150, "http://127.0.0.1:9/")
    assert "all 150 events sent so far failed with connection refused" in text
    assert "nothing listens at http://127.0.0.1:9/" in text and "--ingress" in text
    assert "has no such path" in wiring_text("HTTP 404", 100, "http://h/x")
    assert "HTTP 400" in wiring_text("HTTP 400", 100, "http://h/x")


def test_causes_read_most_first():
    assert causes_text({"timeout": 2, "in-flight cap": 5790, "HTTP 503": 2}) == (
        "in-flight cap 5790, HTTP 503 2, timeout 2"
    )
    assert causes_text({}) == "" and causes_text({"timeout": 0}) == ""
