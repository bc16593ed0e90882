"""`evbench analyze` on a run.json cut short, edited by hand or of another shape: one line naming
the file and what is wrong, before Spark starts (analysis.inputs.read_run_json)."""

import json

import pytest

from analysis.inputs import check_inputs, never_started
from contract.errors import EvbenchError


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[]", "holds a JSON list, not an object"),
        ('{"run_id": "r", "sut": "direct"', "is not JSON"),
        ('{"run_id": "r", "sut": "direct"}', "pace: missing"),
        ('{"run_id": 7, "sut": "direct", "pace": {"steps": []}}', "run_id and sut must be"),
        ('{"run_id": "r", "sut": "direct", "pace": "1k-2k"}', "pace an object with its steps"),
    ],
)
def test_a_run_json_of_the_wrong_shape_is_named_in_one_line(tmp_path, text, said):
    sut = tmp_path / "run-1-p" / "direct"
    sut.mkdir(parents=True)
    (sut / "run.json").write_text(text)
    assert never_started(sut) is False  # not skipped as a run that never started: named
    with pytest.raises(EvbenchError) as raised:
        check_inputs(sut)
    line = str(raised.value)
    assert str(sut / "run.json") in line and said in line and "\n" not in line, line


def test_a_run_json_as_evbench_writes_it_reads(tmp_path):
    sut = tmp_path / "run-1-p" / "direct"
    (sut / "sent").mkdir(parents=True)
    pace = {"name": "p", "spec": "100:1", "steps": [{"rate_per_s": 100, "duration_s": 1}]}
    doc = {"run_id": "r", "sut": "direct", "pace": pace, "status": "completed"}
    (sut / "run.json").write_text(json.dumps(doc))
    with pytest.raises(EvbenchError, match="no schedule start and no sent records"):
        check_inputs(sut)  # past the shape: the next check speaks
