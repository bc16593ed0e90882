"""Ids received and never sent, told apart: foreign, or the run's own whose sent rows died with
their sender (analysis.unrecorded; issue 51, item 9.5)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from analysis.unrecorded import NeverSent, never_sent, own_ids, run_tags
from contract.records import SENT_FIELDS, event_id
from runtime.parquet import PartWriter
from tests.analysis.crafted import sent_row


@pytest.mark.parametrize(
    ("ids", "tags", "expected"),
    [
        ([], ["a1b2c3"], NeverSent()),
        (["a1b2c3-0-7", "a1b2c3-0-7", "a1b2c3-3-12"], ["a1b2c3"], NeverSent(0, 2)),
        (["ffffff-0-7", "zz", "a1b2c3-0-", "a1b2c3-0-07", "xa1b2c3-0-1"], ["a1b2c3"], NeverSent(5)),
        (["a1b2c3-0-7", "d4e5f6-1-0"], ["d4e5f6", "a1b2c3"], NeverSent(0, 2)),  # two tags
        (["a1b2c3-0-7", "zz"], [], NeverSent(2)),  # no tag known: foreign, as before
        (["run.1-x-0-5", "run.1-0-5"], ["run.1-x"], NeverSent(1, 1)),  # a tag is literal
        ([None, "a1b2c3-0-1"], ["a1b2c3"], NeverSent(0, 1)),  # a null is no id
    ],
)
def test_never_sent_ids_are_counted_once_and_split_by_the_runs_own(ids, tags, expected):
    assert never_sent(pa.array(ids, pa.string()), own_ids(tags)) == expected
    assert never_sent(pa.chunked_array([pa.array(ids, pa.string())]), own_ids(tags)) == expected


def test_the_run_tags_come_from_the_sender_and_from_each_writers_first_id(tmp_path):
    for worker, tag in ((0, "a1b2c3"), (1, "d4e5f6")):
        writer = PartWriter(tmp_path, SENT_FIELDS, prefix=f"sent-w{worker}")
        for seq in (worker, worker + 2):
            writer.write([sent_row(event_id(tag, worker, seq), seq, 1, 1, 1, 1, 1, 202, None)])
    parts = sorted(tmp_path.glob("*.parquet"))
    assert len(parts) == 4
    assert run_tags({}, parts) == ("a1b2c3", "d4e5f6")
    said = {"sender": {"summary": {"run_tag": "0fa0fa"}}}
    assert run_tags(said, parts) == ("0fa0fa", "a1b2c3", "d4e5f6")
    assert run_tags(said, []) == ("0fa0fa",)  # a sender killed before its first flush
    assert run_tags({"sender": {"summary": {"run_tag": None}}}, []) == ()
    foreign = PartWriter(tmp_path / "imported", SENT_FIELDS)  # ids of no sender's shape
    foreign.write([sent_row("e-1", 1, 1, 1, 1, 1, 1, 202, None)])
    assert run_tags({}, list((tmp_path / "imported").glob("*.parquet"))) == ()
