"""`evbench search`: the highest rate a system sustains, found by probing (evbench.searchplan).

One run, one system: the receiver starts once, the system once (or afresh before every probe
with `fresh`, the 2019 discipline), and every probe is a sender of its own sending one step, its
step and slot numbers continuing the last probe's, so the whole search is an ordinary run that
`analyze`, the report and `compare` read. After each probe the stragglers are awaited and the
probe is judged from its records (evbench.probejudge); the plan decides the next probe. run.json
is rewritten after every probe, so an interrupted search keeps what it found.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis.verdicts import Thresholds
from evbench.instruments import start_receiver
from evbench.probejudge import Objective, ProbeRecords, probe_figures, verdict_of
from evbench.rundoc import environment, run_document, write_run_json
from evbench.runner import RunOptions, RunOutcome, receiver_limits, wait_for_stragglers
from evbench.samples import ProcessSampler
from evbench.searchplan import (
    BREAKS,
    HOLDS,
    SENDER_LIMITED,
    Outcome,
    Probe,
    Result,
    SearchPlan,
    next_step,
)
from evbench.shared.errors import EvbenchError
from evbench.shared.layout import SutDir, new_sut_dir, next_run_id
from evbench.shared.parquet import part_files
from loadgen.pace import parse_pace
from loadgen.settings import SenderSettings, SendKnobs
from suts.lab import LabSettings, Sut, make_sut

_VERDICTS = {"holds": HOLDS, "sender-limited": SENDER_LIMITED}  # anything else breaks


@dataclass(frozen=True)
class SearchOptions:
    sut: str
    plan: SearchPlan
    runs_dir: Path
    run_id: str | None = None
    send: SendKnobs = field(default_factory=SendKnobs)
    lab: LabSettings = field(default_factory=LabSettings)
    fresh: bool = False  # restart the system (and its broker) before every probe
    settle_s: float = 10.0  # between probes on a warm system
    objective: Objective = field(default_factory=Objective)
    thresholds: Thresholds = field(default_factory=Thresholds)
    grace_s: float = 5.0
    grace_cap_s: float = 60.0


@dataclass
class _Probed:
    probe: Probe
    step: int
    first_seq: int
    start_ns: int
    verdict: str
    reasons: tuple[str, ...]
    figures: dict
    sender: dict


def search(
    opts: SearchOptions, echo: Callable[[str], None], make: Callable[..., Sut] = make_sut
) -> tuple[SutDir, Result | None]:
    """The search as one run; `make` builds the system (the lab's registry unless a test
    brings its own). The result is None when the search was interrupted."""
    run_id = opts.run_id or next_run_id(opts.runs_dir, "search")
    sut_dir = new_sut_dir(opts.runs_dir, run_id, "search", opts.sut)
    started_ns = time.time_ns()
    env = environment()
    sampler = ProcessSampler(sut_dir.samples)
    client = httpx.Client(timeout=2.0)
    receiver, base_url = start_receiver(
        sut_dir.received,
        sut_dir.logs / "receiver.log",
        limits=receiver_limits(opts.send.payload_bytes),
    )
    sampler.watch("receiver", receiver.pid)
    sampler.start()
    tag = secrets.token_hex(3)
    probed: list[_Probed] = []
    sut: Sut | None = None
    result: Result | None = None
    status = "failed"
    try:
        sut, target = _start_sut(opts, sut_dir, run_id, base_url, sampler, make)
        while isinstance(decision := next_step(opts.plan, _outcomes(probed)), Probe):
            if probed and opts.fresh:
                sut.stop()
                sut, target = _start_sut(opts, sut_dir, run_id, base_url, sampler, make)
            elif probed:
                time.sleep(opts.settle_s)
            probed.append(
                _probe(opts, sut_dir, decision, target, base_url, tag, probed, client, echo)
            )
            _record(opts, sut_dir, run_id, probed, sut, env, started_ns, "running")
        result = decision
        status = "completed"
        echo(_result_line(result))
    except KeyboardInterrupt:
        status = "interrupted"
        echo("interrupted: the probes so far are kept")
    finally:
        if sut is not None:
            sut.stop()
        receiver.stop()
        sampler.stop()
        client.close()
        if probed:
            _record(opts, sut_dir, run_id, probed, sut, env, started_ns, status, result)
    return sut_dir, result


def _start_sut(opts, sut_dir, run_id, base_url, sampler, make) -> tuple[Sut, str]:
    sut = make(opts.sut, opts.lab, sut_dir.logs, run_id)
    target = sut.start(f"{base_url}/")
    for role, pid in sut.processes().items():
        sampler.watch(role, pid)
    if sut.components:
        sut.wait_ready()
    return sut, target


def _outcomes(probed: list[_Probed]) -> list[Outcome]:
    return [
        Outcome(
            p.probe,
            _VERDICTS.get(p.verdict, BREAKS),
            p.reasons,
            p.figures["sender_ratio"] * p.probe.rate_per_s,
        )
        for p in probed
    ]


def _probe(opts, sut_dir, probe, target, base_url, tag, probed, client, echo) -> _Probed:
    step = len(probed) + 1
    first_seq = sum(p.probe.rate_per_s * p.probe.hold_s for p in probed)
    kind = "confirm" if probe.confirm else "probe"
    echo(f"{kind} {step}: {probe.rate_per_s}/s for {probe.hold_s} s")
    before = set(part_files(sut_dir.sent))
    settings = SenderSettings(
        target=target,
        pace=f"{probe.rate_per_s}:{probe.hold_s}",
        out=sut_dir.sent,
        knobs=opts.send,
        run_tag=tag,
        first_step=step,
        first_seq=first_seq,
        clock_url=f"{base_url}/clock",
    )
    sender = settings.start(sut_dir.logs / f"sender-{step}.log", f"sender-{step}")
    try:
        done = sender.wait_for("done", probe.hold_s + opts.send.drain_timeout_s + 120)
    finally:
        sender.stop(30)  # done, or stopped by its pid whatever went wrong (Ctrl-C included)
    expected = sum(p.sender.get("ok", 0) for p in probed) + done["ok"]
    wait_for_stragglers(client, base_url, expected, opts.grace_s, opts.grace_cap_s)
    _wait_until_written(client, base_url)
    new_parts = sorted(set(part_files(sut_dir.sent)) - before)
    if not new_parts:
        raise EvbenchError(f"probe {step} left no sent records (see {sender.log_path})")
    records = _records(new_parts, sut_dir.received)
    baseline = next((p.figures["e2e_p99_ms"] for p in probed), None)
    figures = probe_figures(records, step, probe.rate_per_s, probe.hold_s, baseline)
    verdict = verdict_of(figures, opts.thresholds, opts.objective)
    echo(
        f"  {verdict.verdict}"
        + (f": {'; '.join(verdict.reasons)}" if verdict.reasons else "")
        + f" (e2e P99 {figures.e2e_p99_ms or float('nan'):.1f} ms)"
    )
    return _Probed(
        probe, step, first_seq, done["start_ns"], verdict.verdict, verdict.reasons,
        asdict(figures), done,
    )  # fmt: skip


def _wait_until_written(client: httpx.Client, base_url: str, timeout_s: float = 10.0) -> None:
    """The receiver counts a delivery when it arrives and writes it on its next flush: the
    probe is judged from the files, so wait until they hold everything counted."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stats = client.get(f"{base_url}/stats").json()
        if stats["rows_written"] + stats.get("quarantined", 0) >= stats["received"]:
            return
        time.sleep(0.1)
    raise EvbenchError(f"the receiver did not write its records within {timeout_s:g} s")


def _records(sent_parts: list[Path], received_dir: Path) -> ProbeRecords:
    """The probe's sent rows with each event's first delivery (-1: none)."""
    sent = pa.concat_tables(
        [
            pq.read_table(p, columns=["event_id", "intended_ns", "sent_ns", "status", "decoy"])
            for p in sent_parts
        ]
    )
    received = pa.concat_tables(
        [pq.read_table(p, columns=["event_id", "received_ns"]) for p in part_files(received_dir)]
        or [
            pa.table(
                {"event_id": pa.array([], pa.string()), "received_ns": pa.array([], pa.int64())}
            )
        ]
    )
    first = received.group_by("event_id").aggregate([("received_ns", "min")])
    joined = sent.join(first, "event_id", join_type="left outer")
    return ProbeRecords(
        intended_ns=joined["intended_ns"].to_numpy(),
        sent_ns=pc.fill_null(joined["sent_ns"], -1).to_numpy(),
        status=joined["status"].to_numpy(),
        decoy=joined["decoy"].to_numpy(zero_copy_only=False).astype(bool),
        received_ns=pc.fill_null(joined["received_ns_min"], -1).to_numpy(),
    )


def _record(opts, sut_dir, run_id, probed, sut, env, started_ns, status, result=None) -> None:
    """run.json: the probes as the run's steps, and the search's state."""
    spec = ",".join(f"{p.probe.rate_per_s}:{p.probe.hold_s}" for p in probed)
    run_opts = RunOptions(
        pace=parse_pace(spec, name="search"),
        runs_dir=opts.runs_dir,
        sut=opts.sut,
        run_id=run_id,
        send=opts.send,
        grace_s=opts.grace_s,
        grace_cap_s=opts.grace_cap_s,
        lab=opts.lab,
    )
    sender = {
        "start_ns": probed[0].start_ns,
        "sent": sum(p.sender["sent"] for p in probed),
        "ok": sum(p.sender["ok"] for p in probed),
        "failures": sum(p.sender["failures"] for p in probed),
        "probes": [p.sender for p in probed],
    }
    outcome = RunOutcome(sut_dir, status, sender=sender, sut=sut.describe() if sut else {})
    outcome.schedule_start_ns = probed[0].start_ns
    doc = run_document(run_opts, run_id, False, outcome, {}, {}, env, started_ns, time.time_ns())
    doc["search"] = {
        "plan": asdict(opts.plan),
        "fresh": opts.fresh,
        "settle_s": None if opts.fresh else opts.settle_s,
        "objective": asdict(opts.objective),
        "probes": [
            {
                "step": p.step,
                "rate_per_s": p.probe.rate_per_s,
                "hold_s": p.probe.hold_s,
                "confirm": p.probe.confirm,
                "start_ns": p.start_ns,
                "verdict": p.verdict,
                "reasons": list(p.reasons),
                "e2e_p99_ms": p.figures["e2e_p99_ms"],
                "sender_ratio": p.figures["sender_ratio"],
            }
            for p in probed
        ],
        "result": asdict(result) if result is not None else None,
        "minutes": round((time.time_ns() - started_ns) / 60e9, 2),
    }
    write_run_json(sut_dir, doc)


def _result_line(result: Result) -> str:
    if result.max_sustainable_per_s is None:
        return f"search ended: {result.why}"
    return (
        f"max sustainable rate {result.max_sustainable_per_s}/s (held {result.highest_hold_per_s}"
        f"/s, broke {result.lowest_break_per_s or '-'}/s) after {result.probes} probes: "
        f"{result.why}"
    )
