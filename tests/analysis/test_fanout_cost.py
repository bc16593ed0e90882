"""A campaign over fan-outs (`--subscribers 1,10,50`): its values, its items' directories, and
the cost the index draws against N from each system's summary and process samples. Pure."""

from __future__ import annotations

import argparse

import pytest

from analysis.fanout_cost import (
    ProcessCost,
    capacity,
    cost_lines,
    cost_row,
    deliveries,
    fanned_systems,
    process_costs,
    summary_fanout,
)
from analysis.repeats import repeat_groups, shown_name, system_name
from contract.errors import EvbenchError
from contract.layout import fanout_dir_name
from contract.units import NS_PER_S
from evbench.cli import build_parser
from evbench.options import RunOptions, SearchOptions
from evbench.runner import _Matrix
from evbench.searchplan import SearchPlan
from evbench.session_args import session_kwargs
from loadgen.pace import resolve_pace
from runtime.argtypes import count_list
from suts.lab import LabSettings


@pytest.mark.parametrize(
    ("text", "values"),
    [("1", (1,)), ("1,10,50", (1, 10, 50)), ("50, 10 ,1", (50, 10, 1))],
)
def test_a_list_of_counts_keeps_the_users_order(text, values):
    assert count_list("subscriber counts")(text) == values


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("1,x,3", "'x' in '1,x,3' is not a number: give subscriber counts like 1,10,50"),
        ("1,0", "subscriber counts are at least 1"),
        ("1,10,1", "each of the subscriber counts once"),
        ("", "'' in '' is not a number"),
    ],
)
def test_a_bad_count_is_named(text, said):
    with pytest.raises(argparse.ArgumentTypeError, match=said):
        count_list("subscriber counts")(text)


@pytest.mark.parametrize(
    ("fanout", "fanouts", "name"),
    [
        (1, (), "broker-imc"),
        (10, (10,), "broker-imc"),  # one value: the system's own name, as before
        (1, (1, 10, 50), "broker-imc.fanout-01"),  # sorts in the order of N
        (50, (1, 10, 50), "broker-imc.fanout-50"),
        (3, (3, 1), "broker-imc.fanout-3"),
    ],
)
def test_a_fan_outs_directory(fanout, fanouts, name):
    assert fanout_dir_name("broker-imc", fanout, fanouts) == name


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["run", *argv])


def test_the_flags_give_every_value_in_order_and_the_lab_the_first(tmp_path):
    kwargs = session_kwargs(_args("--sut", "broker-imc", "--triggers", "10,1", "--runs-dir",
                                  str(tmp_path)))  # fmt: skip
    assert kwargs["fanouts"] == (10, 1) and kwargs["lab"].fanout == 10
    plain = session_kwargs(_args("--sut", "broker-imc", "--runs-dir", str(tmp_path)))
    assert plain["fanouts"] == (1,) and plain["lab"].fanout == 1


def test_every_value_is_checked_before_the_first_item_starts(tmp_path):
    # --matching 2 is fine for 10 triggers, not for 1: the campaign is refused whole.
    args = _args("--sut", "broker-imc", "--triggers", "10,1", "--matching", "2",
                 "--runs-dir", str(tmp_path))  # fmt: skip
    with pytest.raises(EvbenchError, match="--matching 2 is more than the 1 --triggers"):
        session_kwargs(args)


def test_a_runs_items_are_every_system_at_every_fan_out_and_repeat(tmp_path):
    opts = RunOptions(pace=resolve_pace("50:2"), runs_dir=tmp_path, run_id="r", fanouts=(1, 10),
                      repeats=2)  # fmt: skip
    matrix = _Matrix(opts, print, False, ("channel-imc", "broker-imc"))
    assert matrix.items() == (
        "channel-imc.fanout-01.repeat-1", "channel-imc.fanout-10.repeat-1",
        "broker-imc.fanout-01.repeat-1", "broker-imc.fanout-10.repeat-1",
        "channel-imc.fanout-01.repeat-2", "channel-imc.fanout-10.repeat-2",
        "broker-imc.fanout-01.repeat-2", "broker-imc.fanout-10.repeat-2",
    )  # fmt: skip
    item = matrix.runs["broker-imc.fanout-10.repeat-2"]
    assert (item.sut, item.lab.fanout, item.repeat) == ("broker-imc", 10, 2)
    assert matrix.dirs["broker-imc.fanout-10.repeat-2"].root == (
        tmp_path / "r-50x2" / "broker-imc.fanout-10.repeat-2"
    )


def test_a_searchs_items_are_every_system_at_every_fan_out(tmp_path):
    from evbench.commands.search import _Systems

    options = {"plan": SearchPlan(100, 1000, 0.1), "runs_dir": tmp_path, "run_id": "s",
               "fanouts": (1, 5), "lab": LabSettings(matching=1)}  # fmt: skip
    systems = _Systems(("broker-imc",), options)
    assert systems.items() == ("broker-imc.fanout-1", "broker-imc.fanout-5")
    five = systems.searches["broker-imc.fanout-5"]
    assert isinstance(five, SearchOptions)
    assert (five.lab.fanout, five.lab.matching, five.system_dir()) == (5, 1, "broker-imc.fanout-5")
    assert systems.dir("broker-imc.fanout-5").root == tmp_path / "s-search" / "broker-imc.fanout-5"


def _summary(sut: str, fanout: int, matching: int | None = None, **extra) -> dict:
    summary = {
        "sut": sut,
        "counts": {"received": 1000, "duplicates": 7},
        "max_sustainable_rate_per_s": 500.0,
        **extra,
    }
    if fanout > 1:
        taking = fanout if matching is None else matching
        summary["subscribers"] = [
            {"counts": {"delivered": 1000, "duplicates": n}, "matches": n < taking}
            for n in range(fanout)
        ]
    return summary


def test_a_systems_fan_out_names_it_apart_and_groups_its_repeats_apart():
    one, ten = _summary("broker-imc", 1), _summary("broker-imc", 10)
    assert (summary_fanout(one), summary_fanout(ten)) == (1, 10)
    assert (system_name(one), system_name(ten)) == ("broker-imc", "broker-imc (10 subscribers)")
    repeats = [{**s, "repeat": {"index": k, "of": 2}} for s in (one, ten) for k in (1, 2)]
    assert shown_name(repeats[3]) == "broker-imc (10 subscribers), repeat 2 of 2"
    groups = repeat_groups(repeats)
    assert {name: len(found) for name, found in groups.items()} == {
        "broker-imc": 2, "broker-imc (10 subscribers)": 2,
    }  # fmt: skip


def test_deliveries_and_capacity_from_a_run_or_a_search():
    # Duplicates are deliveries too, with one subscriber or several.
    assert deliveries(_summary("b", 1)) == 1000 + 7
    assert deliveries(_summary("b", 3)) == 3 * 1000 + (0 + 1 + 2)
    assert capacity(_summary("b", 1)) == (500, False)
    assert capacity(_summary("b", 1, max_sustainable_rate_per_s=None)) == (None, False)
    searched = {"result": {"max_sustainable_per_s": 2100}}
    assert capacity(_summary("b", 1, search=searched)) == (2100, True)
    assert capacity(_summary("b", 1, search={"result": None})) == (None, True)


def _sample(process: str, t_s: float, cpu: float, rss: int) -> dict:
    return {"process": process, "t_ns": int(t_s * NS_PER_S), "cpu_percent": cpu, "rss_bytes": rss,
            "pid": 1}  # fmt: skip


def test_the_system_processes_cost_without_the_instruments():
    samples = [
        # a filter at 50 % then 150 % of a core over two 1 s intervals (its first sample opens
        # the span: the CPU it says is since before it)
        _sample("filter", 10.0, 999.0, 100),
        _sample("filter", 11.0, 50.0, 300),
        _sample("filter", 12.0, 150.0, 200),
        # a second process, out of order, over a 2 s interval
        _sample("ingress", 12.0, 25.0, 50),
        _sample("ingress", 10.0, 0.0, 40),
        # the instruments: never the system's
        _sample("sender", 11.0, 90.0, 10**9),
        _sample("sender-w1", 11.0, 90.0, 10**9),
        _sample("receiver", 11.0, 90.0, 10**9),
        _sample("fleet-worker-0", 11.0, 90.0, 10**9),
    ]
    costs = process_costs(samples)
    assert costs == {
        "filter": ProcessCost(cpu_s=2.0, cpu_mean_percent=100.0, rss_peak_bytes=300),
        "ingress": ProcessCost(cpu_s=0.5, cpu_mean_percent=25.0, rss_peak_bytes=50),
    }
    row = cost_row(_summary("broker-imc", 2), samples)  # 2,001 deliveries
    assert row.cpu_s_per_1k("filter") == pytest.approx(2.0 * 1000 / 2001)
    cells = cost_lines(row)
    assert cells[:4] == [
        "broker-imc (2 subscribers)", "2", "500/s (1,000 deliveries/s)", "2,001",
    ]  # fmt: skip
    assert "filter: 1.000 CPU s per 1,000 deliveries, mean 100 % of a core" in cells[4]
    assert process_costs([_sample("filter", 1.0, 50.0, 7)]) == {
        "filter": ProcessCost(cpu_s=0.0, cpu_mean_percent=0.0, rss_peak_bytes=7)
    }


def test_only_systems_measured_at_several_fan_outs_get_a_cost():
    summaries = [_summary("broker-imc", 1), _summary("broker-imc", 10), _summary("channel-imc", 3)]
    assert fanned_systems(summaries) == {"broker-imc"}
    assert fanned_systems([_summary("direct", 1)]) == set()


def test_a_cost_row_of_a_system_that_delivered_nothing():
    nothing = {"received": 0, "duplicates": 0}
    row = cost_row(_summary("b", 1, counts=nothing), [_sample("filter", 1.0, 0.0, 1)])
    assert row.cpu_s_per_1k("filter") is None
    assert "- CPU s per 1,000 deliveries" in cost_lines(row)[4]


def test_only_the_triggers_that_take_the_events_multiply_the_deliveries():
    row = cost_row(_summary("broker-imc", 10, matching=9), [])
    assert (row.fanout, row.takers) == (10, 9)
    assert cost_lines(row)[2] == "500/s (4,500 deliveries/s)"
    assert cost_lines(row)[4] == "not sampled"


def test_the_cost_counts_from_the_schedules_start():
    # Starting the system (joining its consumer groups) is not the deliveries' cost.
    samples = [
        _sample("dispatcher", 1.0, 0.0, 10),
        _sample("dispatcher", 2.0, 400.0, 900),  # the start: four cores, a peak
        _sample("dispatcher", 3.0, 0.0, 20),
        _sample("dispatcher", 4.0, 50.0, 30),
        _sample("dispatcher", 5.0, 50.0, 30),
    ]
    assert process_costs(samples, from_ns=3 * NS_PER_S) == {
        "dispatcher": ProcessCost(cpu_s=1.0, cpu_mean_percent=50.0, rss_peak_bytes=30)
    }
    assert process_costs(samples)["dispatcher"].cpu_s == 5.0


def test_a_users_system_runs_one_fan_out_at_a_time(tmp_path):
    args = _args("--sut", "external", "--ingress", "http://127.0.0.1:9/", "--subscribers",
                 "1,2", "--runs-dir", str(tmp_path))  # fmt: skip
    with pytest.raises(EvbenchError, match="your system is set up for one N at a time"):
        session_kwargs(args)
