"""The one rule for which files of a record directory hold its records (contract.partnames):
rolled files, the parts none of them holds, never a hidden file. Pure, table-driven."""

from __future__ import annotations

import pytest

from contract.partnames import (
    Named,
    covered_names,
    kept_names,
    next_number,
    overlapping,
    parse,
    part_name,
    rolled_name,
    rolling_name,
    stale_names,
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
