"""`evbench send --kafka-config FILE` as a user runs it: a file it cannot use refused before the
sender starts, in one line naming the file, exit 2 and nothing made; a good one's settings given
to the producer, against a real Kafka-protocol broker (Tansu)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from contract.records import SENT_FIELDS
from runtime.parquet import read_parts
from suts.tansu import Tansu, create_topic

pytestmark = pytest.mark.e2e


def _send(tmp: Path, target: str, config: Path | str, *extra: str) -> subprocess.CompletedProcess:
    flags = ["--target", target, "--pace", "20:1", "--out", str(tmp / "sent")]
    argv = [sys.executable, "-m", "evbench", "send", *flags, "--kafka-config", str(config), *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("client.properties", None, "client.properties: no such file"),
        ("client.json", '{"linger.ms": 0,', "client.json: not JSON: Expecting property name"),
        ("client.properties", "linger.ms\n", "client.properties: line 1: 'linger.ms' is not KEY"),
        ("client.conf", '[{"acks": "1"}]', "client.conf: a JSON array is no shape of settings"),
    ],
    ids=["missing", "bad json", "bad properties", "unknown shape"],
)
def test_a_file_it_cannot_use_is_one_line_naming_it_before_anything_starts(
    tmp_path: Path, name: str, content: str | None, said: str
):
    config = tmp_path / name
    if content is not None:
        config.write_text(content)
    done = _send(tmp_path, "kafka://127.0.0.1:9/t", config)
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("evbench send: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"argument --kafka-config: {config.parent}/{said}" in errors[0], errors[0]
    assert done.stdout == "" and not (tmp_path / "sent").exists()  # the sender never started


def test_a_files_settings_reach_the_producer(tmp_path: Path):
    # A value librdkafka refuses can only have come from the file.
    config = tmp_path / "client.properties"
    config.write_text("# the producer's\nlinger.ms = soon\n")
    done = _send(tmp_path, "kafka://127.0.0.1:9/t", config)
    assert done.returncode == 2, done.stderr
    assert 'Invalid value for configuration property "queue.buffering.max.ms"' in done.stderr


def test_a_json_file_drives_a_real_producer(tmp_path: Path):
    config = tmp_path / "producer.json"
    config.write_text(json.dumps({"acks": "all", "linger.ms": 0, "enable.idempotence": False}))
    broker = Tansu(tmp_path / "tansu.log")
    bootstrap = broker.start()
    try:
        create_topic(bootstrap, "t", 1, 1)
        done = _send(tmp_path, f"kafka://{bootstrap}/t", config, "--start-delay", "0.2")
    finally:
        broker.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    rows = read_parts(tmp_path / "sent", SENT_FIELDS).to_pylist()
    assert len(rows) == 20 and all(r["status"] == 200 for r in rows), rows[:3]
