"""`evbench memory`'s records: a scenario's document (contract.memorydocs.ScenarioDoc) from what
its consumer did, and the lines that say what it found, as seed 000 printed them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, cast

from analysis.memory import describe_lines, memory_figures
from contract.memorydocs import CutScenarioDoc, MemoryFiguresDoc, PartitionLagDoc, ScenarioDoc
from contract.units import NS_PER_S
from evbench.consumers import LAB_CONSUMERS, ConsumerSpec
from evbench.options import MemoryOptions
from evbench.session import Echo
from suts.consumers.predict import SARAMA_BUFFER_MESSAGES, fanned_out, predicted, sarama
from suts.settings import LabSettings


@dataclass(frozen=True)
class ConsumerEnd:
    """What following one consumer found, from its start to its end."""

    produced: int  # the backlog it had to drain
    started_ns: int  # every time of the scenario counts from here, on the wall clock
    series: list[tuple[float, int]]  # (seconds since its start, RSS bytes)
    drained_s: float | None
    hwm_bytes: int | None
    died: bool
    exit_code: int
    done: dict[str, Any]  # its last line
    last_progress: dict[str, Any]  # a dead Python client's last progress line still counts
    log_tail: str | None
    logged_errors: list[str]


def scenario_doc(
    options: MemoryOptions, spec: ConsumerSpec, partitions: int, end: ConsumerEnd
) -> ScenarioDoc:
    """The scenario's document without what comes after the consumer (the fill's time, the
    lag, the partitions never consumed)."""
    done, last_progress = end.done, end.last_progress
    first_ns = done.get("first_message_ns") or last_progress.get("first_message_ns")
    first_s = None if first_ns is None else (first_ns - end.started_ns) / NS_PER_S
    series = end.series
    figures = memory_figures(series, first_s, end.drained_s, end.hwm_bytes) if series else None
    lab = spec.client in LAB_CONSUMERS
    subscriptions = options.lab.fanout  # a consumer group each (the dispatcher's lanes)
    prediction = fanned_out(
        predicted(
            spec.client,
            dict(spec.settings),
            partitions,
            options.event_bytes,
            pending_events=LabSettings().max_pending if lab else 0,
        ),
        subscriptions,
    )
    doc: ScenarioDoc = {
        "consumer": spec.name,
        "client": spec.client,
        "settings": dict(spec.settings),
        "partitions": partitions,
        "produced": end.produced,
        "consumed": done.get("consumed", last_progress.get("consumed")),
        "consumer_started_ns": end.started_ns,
        "first_message_s": first_s,
        "drained_s": end.drained_s,
        "exit": "died during the run" if end.died else f"exit {end.exit_code}",
        "exit_code": end.exit_code,
        "errors": done.get("errors", []),
        "per_partition": done.get("per_partition"),
        # A consumer that died says nothing at the end: what its log said last, instead.
        "log_tail": end.log_tail,
        "logged_errors": end.logged_errors,
        "trimmed": done.get("trimmed"),
        "figures": cast(MemoryFiguresDoc, asdict(figures)) if figures else None,
        "predicted_buffer_bytes": prediction.buffer_bytes,
        "predicted_formula": prediction.formula,
        "folder": options.system_dir(),
        "subscriptions": subscriptions,
        "memory_limit_bytes": None if lab else options.bare.memory_limit_bytes,
        "malloc_arena_max": options.malloc_arena_max,
        "fill_s": 0.0,
        "lag": [],
        "never_consumed": [],
    }
    if spec.client == "dispatcher":  # seed 003's rule for the 2019 dispatcher at as many
        seed_rule = sarama(partitions, subscriptions, SARAMA_BUFFER_MESSAGES, options.event_bytes)
        doc["seed_rule_bytes"] = seed_rule.buffer_bytes
        doc["seed_rule_formula"] = seed_rule.formula
    return doc


def cut_scenario(name: str, after_s: float) -> CutScenarioDoc:
    """memory.json's entry for the scenario an interrupt cut short. Pure."""
    return {
        "scenario": name,
        "after_s": round(after_s, 1),
        "reason": (
            f"interrupted after {after_s:.1f} s: no scenario.json, not analysed; what it wrote "
            f"(samples, logs) is in {name}/"
        ),
    }


def say(result: ScenarioDoc, group: str, topic: str, echo: Echo) -> None:
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


def never_consumed(per_partition: dict[str, int] | None, lag: list[PartitionLagDoc]) -> list[int]:
    """Partitions with events that the consumer never read from: by its own count when it
    finished, else (it died or was killed) those with nothing committed. Pure."""
    waiting = [r for r in lag if r["lag"] > 0 or (r["committed"] is None and r["end"] > 0)]
    if per_partition is not None:
        return [r["partition"] for r in waiting if not per_partition.get(str(r["partition"]))]
    return [r["partition"] for r in waiting if r["committed"] is None]
