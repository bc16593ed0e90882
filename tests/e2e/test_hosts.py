"""The instruments across hosts, for real: three hosts on this machine (network namespaces a, b,
c at 198.18.0.1-3 joined by veth pairs to a bridge; tests/e2e/netns.py), each instrument
started as a user starts it on its host, bound to its host's address, and the run brought home
with `evbench collect` from the other hosts."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contract.documents import RunDoc, problems
from contract.records import RECEIVED_FIELDS, SENT_FIELDS
from contract.units import NS_PER_MS
from runtime.parquet import read_parts
from runtime.procs import Child
from tests.e2e.netns import Host, Network, namespace_of, network

pytestmark = pytest.mark.e2e

PACE = "200:2"  # 400 events: enough to cross every path, small enough for 2 shared cores
EVENTS = 400
RECEIVER_PORT, HOP_PORT, RECORDS_PORT, MASTER_PORT = 8080, 8000, 8081, 5557
# Namespaces share one kernel clock: the receiver's --clock-shift stands in for a host whose
# clock is ahead, so that an offset measured across the veth has something to find.
SHIFT_MS = 250
# A veth round trip is tens of microseconds; a few ms allows for a busy 2-core machine.
BOUND_LIMIT_NS = 5 * NS_PER_MS


@pytest.fixture
def net(tmp_path: Path) -> Iterator[Network]:
    with network(tmp_path / "logs") as hosts:
        yield hosts


def _receiver(host: Host, out: Path, *extra: str) -> str:
    """An `evbench receive` bound to the host's address; its URL once it listens there."""
    rx = host.evbench(
        "receiver", "receive", "--host", host.address, "--port", str(RECEIVER_PORT),
        "--out", str(out), "--name", f"rx-{host.name}", *extra,
    )  # fmt: skip
    listening = rx.wait_for("listening", 30)
    assert (listening["host"], listening["port"]) == (host.address, RECEIVER_PORT)
    return f"http://{host.address}:{RECEIVER_PORT}"


def _collect(home: Host, senders: list[tuple[Host, Path]], receiver_url: str, runs: Path) -> Path:
    """`evbench collect`, run on `home`, from `evbench serve-records` serving each sender
    host's records on its address, and from the receiver; the run directory it wrote."""
    args = []
    for host, records in senders:
        serving = host.evbench(
            "records", "serve-records", str(records),
            "--host", host.address, "--port", str(RECORDS_PORT),
        )  # fmt: skip
        serving.wait_for("listening", 30)
        args += ["--sender", f"http://{host.address}:{RECORDS_PORT}"]
    collect = [sys.executable, "-m", "evbench", "collect", *args, "--receiver", receiver_url]
    done = home.run(
        [*collect, "--sut", "hosts", "--runs-dir", str(runs), "--run-id", "x", "--no-analyze"],
        timeout_s=120,
    )
    assert done.returncode == 0, done.stderr
    return runs / "x-200x2" / "hosts"


def _assert_clock(clock: dict, receiver_url: str, shift_ns: int) -> dict:
    """A sender's offsets to the receiver, measured before and after over the veth: each
    within a small bound of the true offset (the receiver's shift); returns them."""
    assert clock["url"] == f"{receiver_url}/clock" and clock["errors"] == []
    for when in ("before", "after"):
        measured = clock[when]
        assert 0 < measured["bound_ns"] < BOUND_LIMIT_NS, measured
        assert abs(measured["offset_ns"] - shift_ns) <= measured["bound_ns"], measured
    return {w: {k: clock[w][k] for k in ("offset_ns", "bound_ns")} for w in ("before", "after")}


def _assert_stayed_inside(net: Network) -> None:
    """Only the benchmarking subnet is routed in a host's namespace (no default route), and
    the root namespace never saw it: nothing the instruments sent could leave."""
    for host in net.hosts.values():
        routes = net.routes(host.netns)
        assert routes and all(r.startswith("198.18.0.0/24 dev eth0 ") for r in routes), routes
    assert (
        "198.18.0."
        not in subprocess.run(
            ["ip", "-4", "addr", "show"], capture_output=True, text=True, check=True
        ).stdout
    )


def _quote(tmp_path: Path, what: str, net: Network, clocks: dict[str, dict]) -> None:
    """The addresses and offsets of this run, printed and kept beside the test's logs."""
    figures = {
        "run": what,
        "hosts": {h.name: {"netns": h.netns, "address": h.address} for h in net.hosts.values()},
        "clock_offsets_by_worker": clocks,
    }
    (tmp_path / "hosts.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures))


def test_sender_hop_and_receiver_on_three_hosts(net, tmp_path):
    """Sender on a, the user's system (an HTTP hop) on b, receiver on c; collected from b."""
    a, b, c = net.hosts["a"], net.hosts["b"], net.hosts["c"]
    shift = ("--clock-shift", str(SHIFT_MS))
    rx_url = _receiver(c, tmp_path / "c" / "received", *shift)
    hop_argv = [sys.executable, "-m", "tests.e2e.netns", "hop", "--host", b.address]
    hop = b.start("hop", [*hop_argv, "--port", str(HOP_PORT), "--subscriber", f"{rx_url}/"])
    hop.wait_for("listening", 30)
    a.wait_json(f"{rx_url}/stats", 15)  # a reaches c through the switch before it sends

    sender = a.evbench(
        "sender", "send", "--target", f"http://{b.address}:{HOP_PORT}/", "--pace", PACE,
        "--out", str(tmp_path / "a" / "sent"), "--clock-url", f"{rx_url}/clock",
    )  # fmt: skip
    done = sender.wait_for("done", 60)
    assert sender.wait(30) == 0
    assert (done["sent"], done["ok"], done["failures"]) == (EVENTS, EVENTS, 0)
    # Every event through the hop and written by the receiver before anything is collected.
    b.wait_json(f"{rx_url}/stats", 30, received=EVENTS, rows_written=EVENTS)
    hop.stop()
    assert hop.final_report() == {"forwarded": EVENTS, "undeliverable": 0}

    run_dir = _collect(b, [(a, tmp_path / "a" / "sent")], rx_url, tmp_path / "home")
    run = json.loads((run_dir / "run.json").read_text())
    assert problems(run, RunDoc) == [] and run["status"] == "completed"
    assert run["hosts"]["receiver"] == c.address
    assert run["sut_settings"]["settings"] == {
        "senders": [f"http://{a.address}:{RECORDS_PORT}"],
        "receivers": [rx_url],
    }
    sent = read_parts(run_dir / "sent", SENT_FIELDS).to_pylist()
    assert len(sent) == EVENTS and {r["status"] for r in sent} == {202}
    received = read_parts(run_dir / "received", RECEIVED_FIELDS).to_pylist()
    assert sorted(r["event_id"] for r in received) == sorted(r["event_id"] for r in sent)
    assert {r["receiver"] for r in received} == {"rx-c"}
    offsets = _assert_clock(run["clock"]["senders"]["0"], rx_url, SHIFT_MS * NS_PER_MS)
    assert run["clock"]["offset_ns"] == offsets["before"]["offset_ns"]
    _assert_stayed_inside(net)
    _quote(tmp_path, f"sender a -> hop b -> receiver c (+{SHIFT_MS} ms)", net, {"0": offsets})


def _follow_fleet(master: Child) -> tuple[dict, dict[int, str]]:
    """The master's done line, and the namespace each worker's sender ran in (asked of the
    kernel by its pid while it runs: the plans go out seconds before the first slot)."""
    placed: dict[int, str] = {}
    deadline = time.monotonic() + 90
    while (line := master.next_line(max(0.1, deadline - time.monotonic()))) is not None:
        if line.get("event") == "fleet_worker":
            placed[line["index"]] = namespace_of(line["pid"])
        elif line.get("event") == "done":
            return line, placed
        elif line.get("event") == "error":
            raise AssertionError(f"fleet master: {line}")
    raise AssertionError(f"the fleet master ended without a done line: {master.tail()}")


def _worker(host: Host, master_address: str, records: Path) -> Child:
    """A fleet worker as a user starts one on its host, keeping its records there."""
    return host.evbench(
        "worker", "send", "--worker", "--master-host", master_address,
        "--out", str(records), "--log-dir", str(host.logs),
    )  # fmt: skip


def test_a_locust_master_and_two_workers_on_three_hosts(net, tmp_path):
    """Master and receiver on a, one worker on b and one on c, each sending across the veth
    and keeping its records on its own host; collected from a."""
    a, b, c = net.hosts["a"], net.hosts["b"], net.hosts["c"]
    rx_url = _receiver(a, tmp_path / "a" / "received")
    master = a.evbench(
        "master", "send", "--master", "--workers", "2", "--target", f"{rx_url}/",
        "--pace", PACE, "--out", str(tmp_path / "a" / "sent"), "--clock-url", f"{rx_url}/clock",
        "--bind-host", a.address, "--bind-port", str(MASTER_PORT), "--expect-timeout", "45",
    )  # fmt: skip
    listening = master.wait_for("fleet_listening", 30)
    assert (listening["host"], listening["port"]) == (a.address, MASTER_PORT)
    workers = [_worker(host, a.address, tmp_path / host.name / "sent") for host in (b, c)]
    done, placed = _follow_fleet(master)
    assert master.wait(30) == 0
    assert [w.wait(30) for w in workers] == [0, 0]  # the master's quit ends them
    assert (done["workers"], done["sent"], done["ok"], done["failed_workers"]) == (
        2, EVENTS, EVENTS, {}
    )  # fmt: skip
    assert sorted(placed.values()) == [b.netns, c.netns]
    c.wait_json(f"{rx_url}/stats", 30, received=EVENTS, rows_written=EVENTS)

    served = [(host, tmp_path / host.name / "sent") for host in (b, c)]
    run_dir = _collect(a, served, rx_url, tmp_path / "home")
    run = json.loads((run_dir / "run.json").read_text())
    assert problems(run, RunDoc) == [] and run["status"] == "completed"
    assert run["hosts"]["receiver"] == a.address and run["sender"]["summary"]["sent"] == EVENTS
    # Each worker's share, sent from its own host: every other slot of the one schedule.
    sent = []
    for host, records in served:
        rows = read_parts(records, SENT_FIELDS).to_pylist()
        (index,) = {r["worker"] for r in rows}
        assert placed[index] == host.netns
        assert len(rows) == EVENTS // 2 and {r["seq"] % 2 for r in rows} == {index}
        sent += rows
    assert {r["status"] for r in sent} == {202}
    collected = read_parts(run_dir / "sent", SENT_FIELDS).to_pylist()
    assert sorted(r["event_id"] for r in collected) == sorted(r["event_id"] for r in sent)
    received = read_parts(run_dir / "received", RECEIVED_FIELDS).to_pylist()
    assert sorted(r["event_id"] for r in received) == sorted(r["event_id"] for r in sent)
    assert {r["receiver"] for r in received} == {"rx-a"}
    clocks = run["clock"]["senders"]
    assert sorted(clocks) == ["0", "1"]
    offsets = {k: _assert_clock(clock, rx_url, 0) for k, clock in clocks.items()}
    _assert_stayed_inside(net)
    _quote(tmp_path, "fleet: master + receiver a, workers b and c", net, offsets)
