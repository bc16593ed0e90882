"""`evbench memory`: how much memory a Kafka consumer takes to drain a backlog (seeds 000/001).

Per scenario (a consumer and a partition count): a fresh Tansu broker, a topic of P partitions
filled as fast as it takes 8 KB events for the fill time (or N events), then one consumer,
started only now as the seed's source was, consuming for the consume time. Every second the
consumer's memory is read from /proc (RSS, USS, anonymous RSS, the kernel's high-water mark)
next to what the consumer says of itself (consumed, Python heap, librdkafka's fetch queue);
every 5 s a line is printed, as the seed reported. At the end: the lag per partition (printed
as `kafka-consumer-groups --describe` prints it), the partitions never consumed, the idle,
peak and post-drain figures, and the predicted buffer bound next to the measured peak.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import cast

from analysis.memory import describe_lines, memory_figures, peak_table
from contract.documents import RunStatus
from contract.errors import EvbenchError
from contract.layout import next_run_id, safe_component
from contract.memorydocs import (
    FailedScenarioDoc,
    MemoryDoc,
    MemoryFiguresDoc,
    PartitionLagDoc,
    ScenarioDoc,
)
from contract.units import NS_PER_S
from evbench.backlog import backlog, backlog_broker, partition_counts, read_lag
from evbench.campaign import each
from evbench.consumers import (
    LAB_CONSUMERS,
    Backlog,
    ClientConsumer,
    Consumer,
    ConsumerSpec,
    LabConsumer,
    logged_errors,
    read_text,
)
from evbench.interrupts import Interrupts
from evbench.options import MemoryOptions
from evbench.session import Echo, Session
from loadgen.settings import SendKnobs
from suts.consumers.predict import predicted
from suts.settings import LabSettings

_REPORT_EVERY_S = 5.0


def run_memory(options: MemoryOptions, echo: Echo) -> tuple[Path, list[FailedScenarioDoc]]:
    """Every scenario in turn; returns the run's directory and the scenarios that failed.
    memory.json is rewritten after each scenario, so an interrupted or failing matrix keeps
    (and analyses) what it finished."""
    run_id = options.run_id or next_run_id(options.runs_dir, "memory")
    root = options.runs_dir / f"{safe_component('run id', run_id)}-memory"
    if root.exists():
        raise EvbenchError(f"{root} already exists: choose another --run-id")
    counts = partition_counts(options)  # before anything is written: the topic may be absent
    try:  # only one of two runs racing for the same directory gets it
        root.parent.mkdir(parents=True, exist_ok=True)
        root.mkdir()
    except FileExistsError:
        raise EvbenchError(f"{root} already exists: choose another --run-id") from None
    options = replace(options, run_id=run_id, send=SendKnobs(payload_bytes=options.event_bytes))
    rows: list[ScenarioDoc] = []
    failed: list[FailedScenarioDoc] = []

    def save(interrupted: bool = False) -> None:
        doc: MemoryDoc = {"scenarios": rows, "failed": failed, "interrupted": interrupted}
        (root / "memory.json").write_text(json.dumps(doc, indent=2) + "\n")

    scenarios = {
        f"{spec.name}-p{partitions}": (spec, partitions)
        for partitions in counts
        for spec in options.consumers
    }

    interrupts = Interrupts(echo)

    def drive(name: str) -> RunStatus:
        if interrupts.count:
            return _interrupted(save, len(rows), root, echo)
        spec, partitions = scenarios[name]
        echo(f"scenario {name}: {partitions} partitions, consumer {spec.name}")
        try:
            result = _scenario(replace(options, sut=name), spec, partitions, echo)
        except KeyboardInterrupt:
            return _interrupted(save, len(rows), root, echo)
        except Exception as exc:  # one scenario failing is reported, not fatal
            reason = f"{type(exc).__name__}: {exc}"
            failed.append({"scenario": name, "reason": reason})
            save()
            raise EvbenchError(f"{reason} (logs in {root / name / 'logs'})") from exc
        (root / name / "scenario.json").write_text(json.dumps(result, indent=2) + "\n")
        rows.append(result)
        save()
        return _interrupted(save, len(rows), root, echo) if interrupts.count else "completed"

    # A failed scenario is recorded in memory.json: the campaign goes on with the next.
    # SIGTERM as Ctrl-C: the scenario under way ends, memory.json kept. One that Python could
    # only swallow (in a fork hook, a finalizer) is still counted: seen between scenarios.
    with interrupts:
        statuses = each(tuple(scenarios), drive, lambda name: True, echo, noun="scenario")
    if "interrupted" in statuses:
        raise KeyboardInterrupt  # the command's exit code for an interrupt (130)
    for line in peak_table(rows):
        echo(line)
    return root, failed


def _interrupted(save: Callable[..., None], kept: int, root: Path, echo: Echo) -> RunStatus:
    """An interrupt ended the matrix: memory.json says so, with the scenarios finished."""
    save(interrupted=True)
    echo(f"interrupted: {kept} finished scenario(s) kept in {root}")
    return "interrupted"


def _scenario(
    options: MemoryOptions, spec: ConsumerSpec, partitions: int, echo: Echo
) -> ScenarioDoc:
    """One consumer draining one backlog, as one session: the broker (a fresh Tansu, or the
    user's --kafka-bootstrap), the scenario's own topic and the consumer are stopped or
    deleted by the session's teardown."""
    session = Session.open(options, "memory", echo, backlog_broker)
    with session:
        drained, fill_s, ends, where = backlog(session, options, partitions)
        result = _consume(options, spec, partitions, drained, session)
        result["fill_s"] = round(fill_s, 3)
        result["lag"] = read_lag(session, drained, ends)
        result["never_consumed"] = never_consumed(result["per_partition"], result["lag"])
        result["kafka"] = {
            "bootstrap": drained.bootstrap,
            "broker": where,
            "topic": drained.topic,
            "group": drained.group,
        }
        result["receiver_url"] = session.base_url or None  # the lab's consumers deliver there
    result["instrument_failures"] = session.outcome.instrument_failures
    if scrapes := session.insight.scrapes():
        result["scrapes"] = scrapes
    _say(result, drained.group, drained.topic, echo)
    return result


def _say(result: ScenarioDoc, group: str, topic: str, echo: Echo) -> None:
    """What a scenario found, as seed 000 printed it."""
    for line in describe_lines(
        group, topic, [(r["partition"], r["committed"], r["end"]) for r in result["lag"]]
    ):
        echo("  " + line)
    if result["exit"] == "died during the run":
        echo(
            f"  the consumer died during the run ({result['exit_code']}); its lag is as it left it"
        )
    if result["never_consumed"]:
        echo(f"  partitions never consumed: {', '.join(map(str, result['never_consumed']))}")
    for line in result["logged_errors"][:5]:
        echo(f"  consumer logged: {line}")
    for failure in result.get("instrument_failures", []):
        echo(f"  instrument failed: {failure}")


def _start_consumer(
    options: MemoryOptions, spec: ConsumerSpec, backlog: Backlog, session: Session
) -> Consumer:
    """The consumer as a process of its own, watched by the session's sampler and stopped by
    its teardown whatever fails; the lab's consumers deliver to the session's receiver."""
    env = {**os.environ}
    if options.malloc_arena_max:
        env["MALLOC_ARENA_MAX"] = str(options.malloc_arena_max)
    log = session.sut_dir.logs / "consumer.log"
    consumer: Consumer
    if spec.client in LAB_CONSUMERS:
        consumer = LabConsumer(spec, backlog, session.start_receiver(), log, env)
    else:
        consumer = ClientConsumer(spec, backlog, options.bare, log, env)
    session.on_teardown(consumer.child.stop)  # by pid, on any exit
    # The session's one sampler, in detail: what the consumer says of itself beside /proc's.
    session.sampler.watch_memory(
        "consumer", consumer.child.pid, consumer.progress, session.sut_dir.samples / "memory"
    )
    session.echo(f"  consumer {spec.name} started, pid {consumer.child.pid}")
    return consumer


def _consume(
    options: MemoryOptions,
    spec: ConsumerSpec,
    partitions: int,
    backlog: Backlog,
    session: Session,
) -> ScenarioDoc:
    """The consumer from its start to its end; the scenario's document without what comes
    after (the fill's time, the lag, the partitions never consumed)."""
    # Every time of the scenario counts from here, on the wall clock (the consumer's own
    # first-message stamp, the samples, the series in the analysis).
    started_ns = time.time_ns()
    consumer = _start_consumer(options, spec, backlog, session)
    series, drained_s, hwm = _follow_consumer(
        options.consume_s, consumer, backlog.produced, started_ns, session
    )
    session.sampler.end_memory("consumer")  # before it is stopped: it says nothing then
    child = consumer.child
    died = not child.alive()
    last_progress = consumer.progress()  # a dead Python client's last line still counts
    code, done = consumer.finish()
    first_ns = done.get("first_message_ns") or last_progress.get("first_message_ns")
    first_s = None if first_ns is None else (first_ns - started_ns) / NS_PER_S
    figures = memory_figures(series, first_s, drained_s, hwm) if series else None
    lab = spec.client in LAB_CONSUMERS
    prediction = predicted(
        spec.client,
        dict(spec.settings),
        partitions,
        options.event_bytes,
        pending_events=LabSettings().max_pending if lab else 0,
    )
    return {
        "consumer": spec.name,
        "client": spec.client,
        "settings": dict(spec.settings),
        "partitions": partitions,
        "produced": backlog.produced,
        "consumed": done.get("consumed", last_progress.get("consumed")),
        "consumer_started_ns": started_ns,
        "first_message_s": first_s,
        "drained_s": drained_s,
        "exit": "died during the run" if died else f"exit {code}",
        "exit_code": code,
        "errors": done.get("errors", []),
        "per_partition": done.get("per_partition"),
        # A consumer that died says nothing at the end: what its log said last, instead.
        "log_tail": child.tail(10) if died or code != 0 else None,
        "logged_errors": logged_errors(read_text(child.log_path)),
        "trimmed": done.get("trimmed"),
        "figures": cast(MemoryFiguresDoc, asdict(figures)) if figures else None,
        "predicted_buffer_bytes": prediction.buffer_bytes,
        "predicted_formula": prediction.formula,
        "memory_limit_bytes": None if lab else options.bare.memory_limit_bytes,
        "malloc_arena_max": options.malloc_arena_max,
        "fill_s": 0.0,
        "lag": [],
        "never_consumed": [],
    }


def _follow_consumer(
    consume_s: float, consumer: Consumer, produced: int, started_ns: int, session: Session
) -> tuple[list[tuple[float, int]], float | None, int | None]:
    """The consumer's samples (the session's sampler takes one a second) for the consume time
    or until it dies: (seconds since its start, RSS) series, when it drained, its high-water
    mark; a line every few seconds, as seed 000 reported."""
    child, echo = consumer.child, session.echo
    started = time.monotonic()
    series: list[tuple[float, int]] = []
    drained_s: float | None = None
    last_report, hwm = -_REPORT_EVERY_S, None  # in seconds since the consumer's start
    running = True
    while running:
        running = time.monotonic() - started < consume_s and child.alive()
        if running:
            time.sleep(1.0)
        for sample in session.sampler.take_memory("consumer"):
            now_s = (sample.t_ns - started_ns) / NS_PER_S
            series.append((now_s, sample.rss_bytes))
            hwm = sample.hwm_bytes
            consumed = sample.consumed or 0
            if drained_s is None and consumed >= produced:
                drained_s = now_s
            if now_s - last_report >= _REPORT_EVERY_S:
                last_report = now_s
                echo(
                    f"  {now_s:5.0f} s  rss {sample.rss_bytes / 2**20:7.1f} MiB  uss "
                    f"{(sample.uss_bytes or 0) / 2**20:7.1f} MiB  consumed {consumed}/{produced}"
                )
    return series, drained_s, hwm


def never_consumed(per_partition: dict[str, int] | None, lag: list[PartitionLagDoc]) -> list[int]:
    """Partitions with events that the consumer never read from: by its own count when it
    finished, else (it died or was killed) those with nothing committed. Pure."""
    waiting = [r for r in lag if r["lag"] > 0 or (r["committed"] is None and r["end"] > 0)]
    if per_partition is not None:
        return [r["partition"] for r in waiting if not per_partition.get(str(r["partition"]))]
    return [r["partition"] for r in waiting if r["committed"] is None]
