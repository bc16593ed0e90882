"""The child processes' lines parsed into their types, and documents read into theirs (pure)."""

import json

import pytest

from contract.consumerlines import parse_consumer_line
from contract.documents import RunDoc, read_document
from contract.errors import EvbenchError
from contract.receiverlines import parse_component_line, parse_receiver_line
from contract.senderlines import (
    SenderStepSummary,
    StepCounts,
    StepIdentity,
    StepTimings,
    parse_sender_line,
    parse_sender_summary,
)


def test_a_known_sender_line_parses_and_an_unknown_one_is_none():
    line = parse_sender_line({"event": "draining", "inflight": 3, "timeout_s": 10.0})
    assert line == {"event": "draining", "inflight": 3, "timeout_s": 10.0}
    assert parse_sender_line({"event": "something-new", "x": 1}) is None
    assert parse_sender_line({"no": "event"}) is None


def test_a_known_line_without_a_required_key_names_it():
    with pytest.raises(EvbenchError, match="'fleet_worker' line without host, pid"):
        parse_sender_line({"event": "fleet_worker", "index": 0})


def test_each_child_has_its_own_kinds():
    assert parse_receiver_line({"event": "listening", "port": 1}) is not None
    assert parse_component_line({"event": "assigned", "partitions": 2, "after_s": 0.5})
    assert parse_receiver_line({"event": "assigned", "partitions": 2, "after_s": 0.5}) is None
    done = {"event": "done", "stop": "SIGTERM", "consumed": 0, "first_message_ns": None}
    assert parse_consumer_line({**done, "per_partition": {}, "errors": []}) is not None
    assert parse_consumer_line({"event": "step_start"}) is None


def test_an_older_senders_cap_count_reads_under_its_name_now():
    """Senders before the renaming said `inflight_cap_hits`, in their lines and summaries."""
    progress = {
        "event": "progress", "step": 1, "target_rate_per_s": 10, "window_sent": 10,
        "lag_p99_ms": 0.1, "sent": 10, "ok": 10, "failures": 0, "inflight": 0,
        "inflight_cap_hits": 2, "rows_written": 10,
    }  # fmt: skip
    line = parse_sender_line(progress)
    assert line is not None and line["event"] == "progress"
    assert line["inflight_cap_refused"] == 2 and "inflight_cap_hits" not in line
    with pytest.raises(EvbenchError, match="inflight_cap_refused"):
        parse_sender_summary({"steps": [{"inflight_cap_hits": 1}]})


def test_a_step_summary_is_its_three_parts():
    """The fleet tally combines keys by the part they are in: every key is in exactly one."""
    parts = [set(StepIdentity.__annotations__), set(StepCounts.__annotations__)]
    parts.append(set(StepTimings.__annotations__))
    every = set(SenderStepSummary.__annotations__) - {"achieved_send_rate_per_s"}
    assert sum(len(p) for p in parts) == len(every) and set().union(*parts) == every


def test_read_document_names_the_file_that_is_not_an_object(tmp_path):
    path = tmp_path / "run.json"
    path.write_text("[1, 2]")
    with pytest.raises(EvbenchError, match=f"{path} holds a JSON list, not an object"):
        read_document(path, RunDoc)
    path.write_text("{")
    with pytest.raises(EvbenchError, match=f"{path} is not JSON"):
        read_document(path, RunDoc)
    with pytest.raises(EvbenchError, match="cannot read"):
        read_document(tmp_path / "missing.json", RunDoc)


def test_read_document_reads_an_older_run_json_by_todays_names(tmp_path):
    path = tmp_path / "run.json"
    summary = {"sent": 5, "inflight_cap_hits": 1, "steps": [{"inflight_cap_hits": 1}]}
    path.write_text(json.dumps({"run_id": "r", "sender": {"summary": summary}}))
    run = read_document(path, RunDoc)
    assert run["run_id"] == "r"
    assert run["sender"]["summary"] == {
        "sent": 5,
        "inflight_cap_refused": 1,
        "steps": [{"inflight_cap_refused": 1}],
    }
