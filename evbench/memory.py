"""`evbench memory`: how much memory a Kafka consumer takes to drain a backlog (seeds 000/001).

Per scenario (a consumer, a partition count and, for the dispatcher, a number of subscriptions:
a consumer group each, seed 003's sizing): a fresh Tansu broker, a topic of P partitions
filled as fast as it takes 8 KB events for the fill time (or N events), then one consumer,
started only now as the seed's source was, consuming for the consume time. Every second the
consumer's memory is read from /proc (RSS, USS, anonymous RSS, the kernel's high-water mark)
next to what the consumer says of itself (consumed, Python heap, librdkafka's fetch queue);
every 5 s a line is printed, as the seed reported. At the end: the lag per partition (printed
as `kafka-consumer-groups --describe` prints it), the partitions never consumed, the idle,
peak and post-drain figures, and the predicted buffer bound next to the measured peak. With
several subscriptions, `consumed` counts every group's deliveries (drained at S x the backlog),
while the lag is the first group's.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path

from analysis.memory import peak_table
from contract.documents import RunStatus
from contract.errors import EvbenchError
from contract.layout import safe_component
from contract.memorydocs import (
    CutScenarioDoc,
    FailedScenarioDoc,
    MemoryDoc,
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
from evbench.memorydoc import ConsumerEnd, cut_scenario, never_consumed, say, scenario_doc
from evbench.options import MemoryOptions
from evbench.session import Echo, Session
from loadgen.settings import SendKnobs
from runtime.runs import make_new, next_run_id, refuse_taken

_REPORT_EVERY_S = 5.0


def run_memory(options: MemoryOptions, echo: Echo) -> tuple[Path, list[FailedScenarioDoc]]:
    """Every scenario in turn; returns the run's directory and the scenarios that failed.
    memory.json is rewritten after each scenario, so an interrupted or failing matrix keeps
    (and analyses) what it finished."""
    run_id = options.run_id or next_run_id(options.runs_dir, "memory")
    root = options.runs_dir / f"{safe_component('run id', run_id)}-memory"
    refuse_taken([root])
    counts = partition_counts(options)  # before anything is written: the topic may be absent
    make_new(root)
    options = replace(options, run_id=run_id, send=SendKnobs(payload_bytes=options.event_bytes))
    scenarios = _Scenarios(options, counts, root, echo)
    # SIGTERM as Ctrl-C: the scenario under way ends, memory.json kept. One that Python could
    # only swallow (in a fork hook, a finalizer) is still counted: seen between scenarios.
    with scenarios.interrupts:
        statuses = each(scenarios, echo)
    if "interrupted" in statuses:
        raise KeyboardInterrupt  # the command's exit code for an interrupt (130)
    for line in peak_table(scenarios.rows):
        echo(line)
    return root, scenarios.failed


class _Scenarios:
    """`memory`'s campaign policy: one session per scenario (a consumer, a partition count, a
    fan-out), every one recorded in memory.json, a failed one too, so the campaign goes on
    after it."""

    noun = "scenario"

    def __init__(
        self, options: MemoryOptions, counts: tuple[int, ...], root: Path, echo: Echo
    ) -> None:
        self.options, self.root, self.echo = options, root, echo
        # A scenario per partition count, consumer and number of subscriptions (each one a
        # consumer group of the dispatcher's: the lab's fan-out), named as its directory.
        self.scenarios = {
            item.system_dir(): (spec, partitions, item)
            for partitions in counts
            for spec in options.consumers
            for fanout in options.campaign_fanouts()
            for item in [replace(options, sut=f"{spec.name}-p{partitions}").fanned(fanout)]
        }
        self.rows: list[ScenarioDoc] = []
        self.failed: list[FailedScenarioDoc] = []
        self.cut_short: list[CutScenarioDoc] = []
        self.interrupts = Interrupts(echo)

    def items(self) -> tuple[str, ...]:
        return tuple(self.scenarios)

    def roots(self) -> list[Path]:
        return [self.root / name for name in self.scenarios]

    def recorded(self, name: str) -> bool:
        return True  # memory.json names a failed scenario

    def drive(self, name: str) -> RunStatus:
        if self.interrupts.count:
            return self._interrupted()
        spec, partitions, item = self.scenarios[name]
        subscriptions = item.lab.fanout
        self.echo(
            f"scenario {name}: {partitions} partitions, consumer {spec.name}"
            + (f", {subscriptions} subscriptions" if subscriptions > 1 else "")
        )
        started = time.monotonic()
        try:
            result = _scenario(item, spec, partitions, self.echo)
        except KeyboardInterrupt:
            self.cut_short.append(cut_scenario(name, time.monotonic() - started))
            return self._interrupted()
        except Exception as exc:  # one scenario failing is reported, not fatal
            reason = f"{type(exc).__name__}: {exc}"
            self.failed.append({"scenario": name, "reason": reason})
            self._save()
            raise EvbenchError(f"{reason} (logs in {self.root / name / 'logs'})") from exc
        (self.root / name / "scenario.json").write_text(json.dumps(result, indent=2) + "\n")
        self.rows.append(result)
        self._save()
        return self._interrupted() if self.interrupts.count else "completed"

    def _save(self, interrupted: bool = False) -> None:
        doc: MemoryDoc = {"scenarios": self.rows, "failed": self.failed, "interrupted": interrupted}
        if self.cut_short:
            doc["cut_short"] = self.cut_short
        (self.root / "memory.json").write_text(json.dumps(doc, indent=2) + "\n")

    def _interrupted(self) -> RunStatus:
        """An interrupt ended the matrix: memory.json says so, with the scenarios finished."""
        self._save(interrupted=True)
        cut = "".join(
            f"; {c['scenario']} cut short after {c['after_s']:g} s" for c in self.cut_short
        )
        self.echo(f"interrupted: {len(self.rows)} finished scenario(s) kept in {self.root}{cut}")
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
    say(result, drained.group, drained.topic, echo)
    return result


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
        receiver = session.start_receiver()
        consumer = LabConsumer(spec, backlog, receiver, log, env, options.lab.fanout)
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
    # Each subscription's consumer group reads the whole backlog: drained once every one has.
    expected = backlog.produced * options.lab.fanout
    series, drained_s, hwm = _follow_consumer(
        options.consume_s, consumer, expected, started_ns, session
    )
    session.sampler.end_memory("consumer")  # before it is stopped: it says nothing then
    child = consumer.child
    died = not child.alive()
    last_progress = consumer.progress()  # a dead Python client's last line still counts
    code, done = consumer.finish()
    end = ConsumerEnd(
        backlog.produced, started_ns, series, drained_s, hwm, died, code, done, last_progress,
        child.tail(10) if died or code != 0 else None, logged_errors(read_text(child.log_path)),
    )  # fmt: skip
    return scenario_doc(options, spec, partitions, end)


def _follow_consumer(
    consume_s: float, consumer: Consumer, expected: int, started_ns: int, session: Session
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
            if drained_s is None and consumed >= expected:
                drained_s = now_s
            if now_s - last_report >= _REPORT_EVERY_S:
                last_report = now_s
                echo(
                    f"  {now_s:5.0f} s  rss {sample.rss_bytes / 2**20:7.1f} MiB  uss "
                    f"{(sample.uss_bytes or 0) / 2**20:7.1f} MiB  consumed {consumed}/{expected}"
                )
    return series, drained_s, hwm
