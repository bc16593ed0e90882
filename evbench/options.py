"""What shapes a measured session, one meaning in every command that drives a system.

`evbench run` (a staircase), `evbench search` (probes) and `evbench memory` (fill and drain)
are policies over one session (evbench.session); the options that shape its instruments and its
system are one dataclass, `SessionOptions`, so that `--receiver-port`, `--ingress`,
`--kafka-bootstrap`, `--workers` or a lab setting cannot mean one thing to one command and
another (or nothing) to the next. Each policy adds its own fields in a subclass.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Self

from analysis.objectives import Objective
from analysis.verdicts import Thresholds
from contract.documents import NotReported, RecordsOnDiskDoc, RunStatus, SutDeathDoc, SutDescription
from contract.layout import SutDir, fanout_dir_name
from contract.lines import SenderClock
from contract.receiverlines import ReceiverStats
from contract.searchdocs import SearchSenderSummary
from contract.senderlines import SenderDone
from evbench.campaign import exit_code
from evbench.consumers import BareClientOptions, ConsumerSpec
from evbench.faultspec import Fault
from evbench.profiles import PprofTarget, ProfileRequest
from evbench.scrape import ScrapeTarget
from evbench.searchplan import SearchPlan
from loadgen.pace import Pace
from loadgen.settings import SendKnobs
from suts.lab import LabSettings


@dataclass(frozen=True, kw_only=True)
class ReceiverOptions:
    """Where the receiver listens and how it stamps: the system delivers to it."""

    host: str = "127.0.0.1"
    port: int = 0  # 0: a free one (an external system must be told where: use a fixed one)
    # Shifts the receiver's clock, as if on a host whose clock is off (tests the correction).
    clock_shift_ms: float = 0.0


@dataclass(frozen=True, kw_only=True)
class SessionOptions:
    """The instruments and the system of one session, as every command takes them."""

    runs_dir: Path
    sut: str = "direct"
    run_id: str | None = None
    send: SendKnobs = field(default_factory=SendKnobs)
    lab: LabSettings = field(default_factory=LabSettings)
    workers: int = 1  # sender processes on this host; above 1, a Locust fleet
    receiver_host: str = "127.0.0.1"
    receiver_port: int = 0
    receiver_clock_shift_ms: float = 0.0
    receiver_url: str | None = None  # as the system reaches it (default: where it listens)
    grace_s: float = 5.0  # stop waiting for stragglers after this long without one
    grace_cap_s: float = 60.0  # and never wait longer than this
    lag_interval_s: float = 5.0  # consumer lag sampled this often on a topic
    # Looking inside the system (evbench.insight): endpoints scraped beside the lab's own
    # /metrics, and one step's profiles.
    scrape: tuple[ScrapeTarget, ...] = ()
    scrape_interval_s: float = 1.0
    profile: ProfileRequest | None = None
    pprof: tuple[PprofTarget, ...] = ()
    # The campaign's fan-outs (--subscribers 1,10,50), each in turn: `lab.fanout` is this
    # session's; one value or none and the directory is the system's name alone.
    fanouts: tuple[int, ...] = ()

    def system_dir(self) -> str:
        """This session's directory name in its run (contract.layout.fanout_dir_name)."""
        return fanout_dir_name(self.sut, self.lab.fanout, self.fanouts)

    def campaign_fanouts(self) -> tuple[int, ...]:
        """The fan-outs the campaign runs in turn: this session's alone when none was given."""
        return self.fanouts or (self.lab.fanout,)

    def fanned(self, fanout: int) -> Self:
        """These options for one item of a campaign over fan-outs."""
        return replace(self, lab=replace(self.lab, fanout=fanout))

    @property
    def receiver(self) -> ReceiverOptions:
        return ReceiverOptions(
            host=self.receiver_host,
            port=self.receiver_port,
            clock_shift_ms=self.receiver_clock_shift_ms,
        )


@dataclass(frozen=True, kw_only=True)
class RunOptions(SessionOptions):
    """`evbench run`: a pace through one system."""

    pace: Pace
    faults: tuple[Fault, ...] = ()  # --fault, --fault-exec: checked against the system
    repeat: int = 1  # which run of the pace this is, of `repeats` (--repeat)
    repeats: int = 1
    objectives: tuple[str, ...] = ()  # --slo's terms, kept in run.json for a re-analysis


@dataclass
class RunOutcome:
    """What a session knew when it ended; run.json is built from it (evbench.rundoc)."""

    sut_dir: SutDir
    status: RunStatus  # completed | interrupted | failed (run.json says running until the end)
    # The sender's done line (a search's: its probes'), {} until it finished.
    sender: SenderDone | SearchSenderSummary | NotReported = field(
        default_factory=lambda: NotReported()
    )
    # The receiver's final counters, {} until it stopped and said them.
    receiver: ReceiverStats | NotReported = field(default_factory=lambda: NotReported())
    sut: SutDescription = field(default_factory=lambda: SutDescription())
    sut_died: list[str] = field(default_factory=list)
    # When each process of the system was seen gone (evbench.deathwatch), across restarts.
    sut_deaths: list[SutDeathDoc] = field(default_factory=list)
    # Why the instruments cannot be trusted (any entry fails the run; analysis says so too).
    instrument_failures: list[str] = field(default_factory=list)
    schedule_start_ns: int | None = None  # announced by the sender before its first slot
    # Each sender worker's clock offsets (SenderClock) as of the start line; done has both.
    sender_clocks: dict[str, SenderClock] = field(default_factory=dict)
    grace: dict[str, Any] = field(default_factory=dict)  # how waiting for stragglers ended
    receiver_url: str = ""  # the receiver's base URL, once it listens
    reason: str | None = None  # why it ended as it did, when no line above says it
    records: RecordsOnDiskDoc | None = None  # counted from the files as the session ended

    @property
    def exit_code(self) -> int:
        return exit_code(self.status)


@dataclass(frozen=True, kw_only=True)
class MemoryOptions(SessionOptions):
    """`evbench memory`: the session's options (the receiver the lab's consumers deliver to,
    --kafka-bootstrap and --topic for the user's own Kafka instead of a fresh Tansu,
    --replication) and the matrix's."""

    partitions: tuple[int, ...] = (1, 50, 100)
    consumers: tuple[ConsumerSpec, ...] = ()
    fill_s: float = 120.0
    fill_events: int | None = None  # instead of fill_s
    consume_s: float = 250.0
    event_bytes: int = 8192
    max_backlog_bytes: int = 4 * 2**30  # a fresh Tansu keeps every record in memory
    bare: BareClientOptions = field(default_factory=BareClientOptions)
    malloc_arena_max: int | None = None
    keep_topics: bool = False  # on the user's Kafka: keep the scenarios' own topics


@dataclass(frozen=True, kw_only=True)
class SearchOptions(SessionOptions):
    """`evbench search`: the session's options (receiver, system, senders) and the plan's."""

    plan: SearchPlan
    fresh: bool = False  # restart the system (and its broker) before every probe
    settle_s: float = 10.0  # a warm system is quiet this long before the next probe
    objective: tuple[Objective, ...] = ()  # --slo: asked of every probe
    thresholds: Thresholds = field(default_factory=Thresholds)
    # --fault, --fault-exec: STEP counts probes; a probe with a fault holds when the system
    # recovered from it within the probe (evbench.probejudge)
    faults: tuple[Fault, ...] = ()
