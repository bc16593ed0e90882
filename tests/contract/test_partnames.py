"""The one rule for which files of a record directory hold its records (contract.partnames):
rolled files, the parts none of them holds, never a hidden file. Pure, table-driven."""

from __future__ import annotations

import pytest

from contract.partnames import (
    IDENTITY_KEY,
    Identity,
    Named,
    covered_names,
    identity_metadata,
    kept_names,
    next_number,
    overlapping,
    parse,
    part_name,
    read_identity,
    rolled_name,
    rolling_name,
    stale_names,
    unique_files,
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("rx-000007.parquet", Named("rx", 7, 7, rolled=False)),
        ("rx-000000-000059.rolled.parquet", Named("rx", 0, 59, rolled=True)),
        # A prefix ending in digits is still the prefix: the number is the last run of digits.
        ("sent-w1-000003.parquet", Named("sent-w1", 3, 3, rolled=False)),
        ("r-000001-000002.parquet", Named("r-000001", 2, 2, rolled=False)),  # a part, not a roll
        ("sent-w0-000060-000119.rolled.parquet", Named("sent-w0", 60, 119, rolled=True)),
        ("rx-1234567.parquet", Named("rx", 1234567, 1234567, rolled=False)),  # past 6 digits
        ("rx-000009-000003.rolled.parquet", None),  # a span backwards is nobody's roll
        ("metrics.parquet", None),
        ("rx-000001.rolled.parquet", None),
        ("rx-x.parquet", None),
    ],
)
def test_a_name_says_whose_parts_it_holds(name, expected):
    assert parse(name) == expected


def test_names_are_made_as_they_are_read():
    assert parse(part_name("a-1", 12)) == Named("a-1", 12, 12, rolled=False)
    assert parse(rolled_name("a-1", 12, 70)) == Named("a-1", 12, 70, rolled=True)
    assert rolling_name("a-1", 12).startswith(".")  # hidden until whole


@pytest.mark.parametrize(
    ("names", "kept"),
    [
        # A run before rolling existed: every part, as always.
        (["rx-000000.parquet", "rx-000001.parquet"], ["rx-000000.parquet", "rx-000001.parquet"]),
        # A roll done and its parts deleted, a second's part after it.
        (
            ["rx-000000-000002.rolled.parquet", "rx-000003.parquet"],
            ["rx-000000-000002.rolled.parquet", "rx-000003.parquet"],
        ),
        # Killed between the rename and the deletes: the parts it holds are not counted again.
        (
            [
                "rx-000000.parquet",
                "rx-000001.parquet",
                "rx-000002.parquet",
                "rx-000000-000002.rolled.parquet",
                "rx-000003.parquet",
            ],
            ["rx-000000-000002.rolled.parquet", "rx-000003.parquet"],
        ),
        # Killed mid-roll: the hidden file being rolled and a part's temp file are never read.
        (
            [".rx-000003.rolling.tmp", ".rx-000005.parquet.tmp", "rx-000003.parquet"],
            ["rx-000003.parquet"],
        ),
        # Another writer's parts with the same numbers are its own (prefix, then number).
        (
            [
                "sent-w0-000000-000001.rolled.parquet",
                "sent-w0-000001.parquet",
                "sent-w1-000001.parquet",
            ],
            ["sent-w0-000000-000001.rolled.parquet", "sent-w1-000001.parquet"],
        ),
        # A prefix that ends like a number is not covered by the shorter prefix's roll.
        (
            ["r-000000-000009.rolled.parquet", "r-000005-000003.parquet"],
            ["r-000000-000009.rolled.parquet", "r-000005-000003.parquet"],
        ),
        # Just outside a span, on either side, and between two spans.
        (
            [
                "rx-000010-000019.rolled.parquet",
                "rx-000030-000039.rolled.parquet",
                "rx-000009.parquet",
                "rx-000020.parquet",
                "rx-000025.parquet",
                "rx-000030.parquet",
                "rx-000039.parquet",
                "rx-000040.parquet",
            ],
            [
                "rx-000009.parquet",
                "rx-000010-000019.rolled.parquet",
                "rx-000020.parquet",
                "rx-000025.parquet",
                "rx-000030-000039.rolled.parquet",
                "rx-000040.parquet",
            ],
        ),
        # Not a record file, or someone's file that neither pattern names: as before rolling.
        (
            ["notes.txt", "imported.parquet", "rx-000001.json", ".hidden.parquet"],
            ["imported.parquet"],
        ),
        ([], []),
    ],
)
def test_the_files_that_hold_a_directorys_records(names, kept):
    assert kept_names(names) == kept
    assert kept_names(reversed(names)) == kept  # the listing's order does not matter
    assert sorted(covered_names(names)) == sorted(
        n for n in names if n.endswith(".parquet") and not n.startswith(".") and n not in kept
    )


@pytest.mark.parametrize(
    ("names", "prefix", "expected"),
    [
        ([], "rx", 0),
        (["rx-000004.parquet"], "rx", 5),
        (["rx-000000-000059.rolled.parquet"], "rx", 60),  # its parts are gone, not reusable
        (["rx-000000-000059.rolled.parquet", "rx-000060.parquet"], "rx", 61),
        (["rx-000000-000059.rolled.parquet", "other-000100.parquet"], "rx", 60),
        ([".rx-000070.rolling.tmp"], "rx", 0),
    ],
)
def test_a_writer_numbers_after_every_part_and_roll_of_its_prefix(names, prefix, expected):
    assert next_number(names, prefix) == expected


def test_a_writer_starting_over_deletes_only_its_own_leftovers():
    names = [
        ".rx-000003.rolling.tmp",  # a roll a kill cut short
        ".rx-000009.parquet.tmp",  # a part a kill cut short
        ".other-000003.rolling.tmp",  # another writer's: not ours to delete
        "rx-000000-000002.rolled.parquet",
        "rx-000001.parquet",  # held by the roll above
        "rx-000003.parquet",
        "other-000000-000002.rolled.parquet",
        "other-000002.parquet",  # held, but another writer's
    ]
    assert stale_names(names, "rx") == [
        ".rx-000003.rolling.tmp",
        ".rx-000009.parquet.tmp",
        "rx-000001.parquet",
    ]


def test_overlapping_rolls_are_found():
    names = [
        "rx-000000-000009.rolled.parquet",
        "rx-000005-000014.rolled.parquet",
        "rx-000015-000019.rolled.parquet",
        "tx-000000-000009.rolled.parquet",
    ]
    assert overlapping(names) == [
        ("rx-000000-000009.rolled.parquet", "rx-000005-000014.rolled.parquet")
    ]
    assert overlapping(names[2:]) == []


W, V = "0a1b2c3d4e5f6071", "8899aabbccddeeff"  # two writers' ids


def _part(first: int, last: int | None = None, writer: str = W) -> Identity:
    return Identity(writer, first, first if last is None else last)


@pytest.mark.parametrize(
    ("files", "kept", "copies"),
    [
        # a part copied under another name: the one named for what it holds is kept
        (
            [("copy.parquet", _part(3)), ("rx-000003.parquet", _part(3))],
            ["rx-000003.parquet"],
            [("copy.parquet", "rx-000003.parquet")],
        ),
        # a copy under another part's name (its number says 9, its footer says 3)
        (
            [("rx-000003.parquet", _part(3)), ("rx-000009.parquet", _part(3))],
            ["rx-000003.parquet"],
            [("rx-000009.parquet", "rx-000003.parquet")],
        ),
        # parts a rolled file holds, whatever their names; and a rolled file copied
        (
            [
                ("a.parquet", _part(1)),
                ("b.rolled.parquet", _part(0, 2)),
                ("rx-000000-000002.rolled.parquet", _part(0, 2)),
            ],
            ["rx-000000-000002.rolled.parquet"],
            [
                ("b.rolled.parquet", "rx-000000-000002.rolled.parquet"),
                ("a.parquet", "rx-000000-000002.rolled.parquet"),
            ],
        ),
        # parts two rolled files hold between them
        (
            [
                ("rx-000000-000001.rolled.parquet", _part(0, 1)),
                ("rx-000002-000003.rolled.parquet", _part(2, 3)),
                ("x.parquet", _part(1, 2)),
            ],
            ["rx-000000-000001.rolled.parquet", "rx-000002-000003.rolled.parquet"],
            [("x.parquet", "rx-000000-000001.rolled.parquet")],
        ),
        # the same numbers from two writers (a receiver restarted elsewhere): both kept
        (
            [("a.parquet", _part(0)), ("b.parquet", _part(0, writer=V))],
            ["a.parquet", "b.parquet"],
            [],
        ),
        # a file that does not say what it holds (written before files said it): kept
        (
            [("old.parquet", None), ("rx-000000.parquet", _part(0))],
            ["old.parquet", "rx-000000.parquet"],
            [],
        ),
    ],
)
def test_a_file_whose_parts_another_holds_is_a_copy(files, kept, copies):
    found = unique_files(files)
    assert (found.kept, found.copies, found.clashes) == (kept, copies, [])


def test_files_that_share_some_parts_but_not_all_clash():
    files = [("rx-000000-000002.rolled.parquet", _part(0, 2)), ("y.parquet", _part(2, 4))]
    assert unique_files(files).clashes == [("rx-000000-000002.rolled.parquet", "y.parquet")]


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        (identity_metadata(_part(4, 9)), _part(4, 9)),
        (None, None),
        ({}, None),
        ({IDENTITY_KEY: b"not json"}, None),
        ({IDENTITY_KEY: b'{"writer": "w"}'}, None),
        ({IDENTITY_KEY: b'{"writer": "w", "first": 5, "last": 4}'}, None),  # backwards
        ({b"other": b"1", **identity_metadata(_part(0))}, _part(0)),
    ],
)
def test_a_file_says_what_it_holds_in_its_metadata(metadata, expected):
    assert read_identity(metadata) == expected
