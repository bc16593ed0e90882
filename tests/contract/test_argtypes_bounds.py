"""The bounds the option types hold (issue 33, item 10), and where a directory cannot be used
(item 11): each bound means something, and is held against what it stands for."""

from __future__ import annotations

import argparse
import os
import secrets
from collections.abc import Callable
from pathlib import Path

import pytest

from contract.errors import EvbenchError
from contract.records import event_id
from loadgen.payload import PayloadBuilder
from receivers.identify import MAX_KNOWN_PATHS
from receivers.limits import Limits
from runtime.argtypes import (
    EPOCH_NS_MIN,
    PAYLOAD_MAX_BYTES,
    PAYLOAD_MIN_BYTES,
    SUBSCRIBERS_MAX,
    WORKERS_PER_CORE,
    clock_shift_ms,
    count_list,
    directory_path,
    epoch_ns,
    matching_triggers,
    payload_bytes,
    spark_master,
    spark_remote,
    workers_on_this_host,
)
from runtime.runs import new_sut_dir, unusable_directory


def test_the_largest_payload_is_the_receivers_body_limit() -> None:
    assert Limits().max_body_bytes == PAYLOAD_MAX_BYTES


def test_the_most_subscribers_is_what_the_receivers_table_of_paths_holds() -> None:
    assert SUBSCRIBERS_MAX == MAX_KNOWN_PATHS


@pytest.mark.parametrize(
    ("text", "taken"),
    [
        ("1", (1,)),
        ("1,10,1024", (1, 10, 1024)),
        ("0", None),
        ("1025", None),
        ("1," + "9" * 14, None),
    ],
)
def test_subscriber_counts_are_one_to_the_most(text: str, taken: tuple[int, ...] | None) -> None:
    parse = count_list("subscriber counts", SUBSCRIBERS_MAX, "why")
    if taken is not None:
        assert parse(text) == taken
        return
    with pytest.raises(argparse.ArgumentTypeError, match=r"counts are 1 to 1024 \(why\)"):
        parse(text)


@pytest.mark.parametrize(("text", "taken"), [("1", 1), ("1024", 1024), ("0", None), ("1025", None)])
def test_matching_triggers_are_at_least_one(text: str, taken: int | None) -> None:
    if taken is not None:
        assert matching_triggers(text) == taken
        return
    with pytest.raises(argparse.ArgumentTypeError, match="out of range: 1 to the --triggers"):
        matching_triggers(text)


def test_the_smallest_payload_carries_the_longest_id_any_run_makes() -> None:
    """A 6-character run tag (the sender's default), the most workers this host allows, and
    the last slot an 18-digit sequence number holds (contract.records.EVENT_ID_SEQ_PATTERN)."""
    most_workers = WORKERS_PER_CORE * (os.cpu_count() or 1)
    longest = event_id(secrets.token_hex(3), max(most_workers, 9999), 10**18 - 1)
    payload = PayloadBuilder(PAYLOAD_MIN_BYTES, len(longest)).build(longest)
    assert len(payload) == PAYLOAD_MIN_BYTES


def _refused(parse: Callable[[str], object], text: str, said: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=said):
        parse(text)


_ACCEPTED = [
    (payload_bytes, "64", 64),
    (payload_bytes, "1048576", 1048576),
    (clock_shift_ms, "-86400000", -86400000.0),
    (clock_shift_ms, "250ms", 250.0),
    (epoch_ns, str(EPOCH_NS_MIN), EPOCH_NS_MIN),
    (directory_path, "runs", Path("runs")),
    *(
        (spark_master, master, master)
        for master in (
            "local",
            "local[4]",
            "local[*]",
            "local[*,3]",
            "local-cluster[2,1,1024]",
            "spark://h1:7077,h2:7077",
            "yarn",
            "k8s://https://api:6443",
            "mesos://zk://h:2181/mesos",
        )
    ),
    (spark_remote, "sc://h:15002", "sc://h:15002"),
]

_REFUSED = [
    (payload_bytes, "63", "at least 64 bytes"),
    (payload_bytes, "1048577", "at most 1048576"),
    (payload_bytes, "1e12", "not a whole number"),
    (clock_shift_ms, "86400001", "more than a day"),
    (clock_shift_ms, "-1e20", "more than a day"),
    (clock_shift_ms, "nan", "finite"),
    (epoch_ns, "-1", "no instant"),
    (epoch_ns, "0", "no instant"),
    (epoch_ns, "1700000000", "no instant"),  # seconds, not nanoseconds
    (directory_path, "", "an empty path"),
    (directory_path, "  ", "an empty path"),
    (spark_master, "garbage://x", "not a Spark master"),
    (spark_master, "local[0]", "not a Spark master"),
    (spark_master, "spark://", "not a Spark master"),
    (spark_master, "sc://h:15002", "--spark-remote"),
    (spark_remote, "spark://h:7077", "not a Spark Connect URL"),
]


@pytest.mark.parametrize(("parse", "text", "expected"), _ACCEPTED)
def test_values_within_the_bounds_are_taken(
    parse: Callable[[str], object], text: str, expected: object
) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(("parse", "text", "said"), _REFUSED)
def test_values_out_of_bounds_are_refused_saying_why(
    parse: Callable[[str], object], text: str, said: str
) -> None:
    _refused(parse, text, said)


def test_workers_are_bounded_by_the_cores_of_this_host() -> None:
    most = WORKERS_PER_CORE * (os.cpu_count() or 1)
    assert workers_on_this_host(str(most)) == most
    _refused(workers_on_this_host, str(most + 1), f"at most {most}")
    _refused(workers_on_this_host, "0", "at least 1")


def test_where_a_directory_cannot_be(tmp_path: Path) -> None:
    a_file = tmp_path / "f"
    a_file.write_text("x")
    dangling = tmp_path / "gone"
    dangling.symlink_to(tmp_path / "nowhere")
    assert unusable_directory(tmp_path) is None
    assert unusable_directory(tmp_path / "new" / "deeper") is None
    assert unusable_directory(a_file) == f"{a_file} is not a directory"
    assert (
        unusable_directory(a_file / "x")
        == f"{a_file}/x cannot be made: {a_file} is not a directory"
    )
    assert unusable_directory(dangling / "x") == f"{dangling} is a broken symbolic link"
    assert not (tmp_path / "new").exists()  # asking made nothing


def test_a_run_directory_taken_between_look_and_mkdir_is_already_there(tmp_path: Path) -> None:
    """What a run racing another for the same new directory meets; a dangling link holds that
    moment still (it does not exist to the look; mkdir finds the name taken)."""
    root = tmp_path / "runs" / "r-p" / "direct"
    root.parent.mkdir(parents=True)
    root.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(EvbenchError, match="already exists: choose another --run-id"):
        new_sut_dir(tmp_path / "runs", "r", "p", "direct")


def test_a_run_directory_under_a_file_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "runs").write_text("x")
    with pytest.raises(EvbenchError, match=r"cannot make the run directory .*check --runs-dir"):
        new_sut_dir(tmp_path / "runs", "r", "p", "direct")
