import pytest

from contract.errors import PaceError
from loadgen.pace import Pace, Step, inline_name, parse_pace, parse_warmup, resolve_pace

GOOD = [
    ("1000:30", [(1000, 30)]),
    ("1000", [(1000, 10)]),  # 2019: a missing duration means 10 s
    ("1000:30s", [(1000, 30)]),
    ("1000:6m", [(1000, 360)]),
    ("1000:1.5m", [(1000, 90)]),
    (" 500 : 10 , 1000:10 ", [(500, 10), (1000, 10)]),
    ("# comment only line\n100:2\n\n200:3 # trailing comment\n", [(100, 2), (200, 3)]),
    ("100:2,\n200:3", [(100, 2), (200, 3)]),  # a line may end with a comma
    ("1,2:1", [(1, 10), (2, 1)]),
]


@pytest.mark.parametrize(("text", "steps"), GOOD)
def test_parses(text, steps):
    pace = parse_pace(text)
    assert [(s.rate_per_s, s.duration_s) for s in pace.steps] == steps


BAD = [
    # (text, fragments the message must contain: the token and its position)
    ("", ["no steps"]),
    ("# nothing but a comment\n\n", ["no steps"]),
    ("0:10", ["'0:10'", "1:1", "step 1", "greater than zero"]),
    ("100:0", ["'100:0'", "greater than zero"]),
    ("-5:10", ["'-5:10'", "whole number"]),
    ("100:-1", ["'100:-1'", "duration"]),
    ("abc", ["'abc'", "rate"]),
    ("100:10x", ["'100:10x'", "duration"]),
    ("1.5:10", ["'1.5:10'", "whole number"]),
    ("100:0.5", ["'100:0.5'", "whole seconds"]),
    ("100:10,,200:10", ["1:8", "empty step"]),
    ("100:10, 200:ten", ["'200:ten'", "1:9", "step 2"]),
    ("100:10\n  7:3:2", ["'7:3:2'", "2:3", "step 2"]),
    (",100:10", ["1:1", "empty step"]),
]


@pytest.mark.parametrize(("text", "fragments"), BAD)
def test_rejects_with_token_and_position(text, fragments):
    with pytest.raises(PaceError) as caught:
        parse_pace(text, source="p.pace")
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_warmup():
    assert parse_warmup("10s@100") == Step(100, 10)
    assert parse_warmup("1m@50") == Step(50, 60)
    with pytest.raises(PaceError, match="DURATION@RATE"):
        parse_warmup("10s")
    with pytest.raises(PaceError, match="greater than zero"):
        parse_warmup("10s@0")


def test_pace_totals_and_spec_round_trip():
    pace = parse_pace("1000:30, 100:1m\n2000")
    assert pace.duration_s == 30 + 60 + 10
    assert pace.events == 30_000 + 6_000 + 20_000
    assert parse_pace(pace.spec).steps == pace.steps


def test_shipped_paces_are_the_2019_definitions():
    two_k = resolve_pace("1k-2k")
    rates = [s.rate_per_s for s in two_k.steps]
    assert rates == [1000, 1100, 1200, 1300, 1400, 1500, 100, 1600, 1700, 1800, 1900, 2000]
    assert [s.duration_s for s in two_k.steps] == [30] * 6 + [60] + [30] * 5
    assert resolve_pace("1k-long.pace").steps == (Step(1000, 360),)
    assert resolve_pace("smoke").duration_s <= 10


def test_the_soak_pace_is_an_hour_at_1000_per_s():
    """One step of an hour: long enough for the drift verdict (ten minutes or more) and for
    the report's windows to be a minute or less wide."""
    soak = resolve_pace("soak")
    assert soak.steps == (Step(1000, 3600),)
    assert soak.duration_s == 3600 and soak.events == 3_600_000


def test_resolve_inline_and_unknown(tmp_path):
    assert resolve_pace("500:10,1000:10", tmp_path) == Pace(
        "500x10-1000x10", (Step(500, 10), Step(1000, 10))
    )
    with pytest.raises(PaceError, match="unknown pace '1k-3k'"):
        resolve_pace("1k-3k", tmp_path)
    (tmp_path / "mine.pace").write_text("5:1\n")
    assert resolve_pace("mine", tmp_path).steps == (Step(5, 1),)
    (tmp_path / "broken.pace").write_text("5:1\n6:x\n")
    with pytest.raises(PaceError, match=r"broken\.pace:2:1"):
        resolve_pace("broken", tmp_path)


def test_inline_names_are_directory_safe():
    assert inline_name("500:10,1000:10") == "500x10-1000x10"
    long_spec = ",".join(["1000:30"] * 20)
    assert inline_name(long_spec).startswith("custom-")
    assert inline_name(long_spec) == inline_name(long_spec)
