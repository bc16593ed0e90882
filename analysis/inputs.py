"""What `evbench analyze` reads, checked before Spark starts: the SUT directories under a path,
each one's run.json, the footers of its part files and its schedule start, and the compacted
copies of its records (analysis.compact). Spark-free: `evbench analyze` does this while Spark
starts, and a bad path is named in seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis import sentindex
from analysis.compact import Copy, compact_received, holds
from analysis.fanout import fanout_of
from analysis.hostload import HostTicks, host_ticks
from analysis.objectives import Objective
from analysis.slices import SLICE_EVENTS
from analysis.verdicts import Thresholds
from contract.documents import RunDoc, read_document, schedule_start_ns
from contract.errors import EvbenchError
from contract.layout import SutDir
from contract.records import (
    HOST_SAMPLE_FIELDS,
    PROCESS_SAMPLE_FIELDS,
    RECEIVED_FIELDS,
    SENT_FIELDS,
    Field,
)
from contract.shapes import RUN_JSON_NEEDS
from runtime.clocks import DEFAULT_CORRECTION
from runtime.parquet import checked_parts, part_files


@dataclass(frozen=True)
class AnalyzeOptions:
    trim_s: float = 0.0
    export_knative: bool = False
    export_hdr: bool = False  # HdrHistogram interval logs (analysis.hdr)
    clock_correction: str = DEFAULT_CORRECTION  # runtime.clocks.CORRECTION_MODES
    thresholds: Thresholds = field(default_factory=Thresholds)
    # Events per slice, the unit of work (analysis.slices): memory per task against tasks.
    slice_events: int = SLICE_EVENTS
    objectives: tuple[Objective, ...] = ()  # --slo: judged on each summary (analysis.objectives)


@dataclass(frozen=True)
class SutInputs:
    """A SUT directory checked before Spark starts: run.json read, every part file's footer
    checked, the schedule start known."""

    path: Path
    run: RunDoc
    start_ns: int
    # Where start_ns came from: run.json, or (runs recorded before run.json kept it when the
    # sender died) the earliest slot in sent/, which is slot 0 of the schedule.
    start_source: str
    sent_parts: tuple[Path, ...]
    received_parts: tuple[Path, ...]
    # The last slot in sent/ (from the sent index, by `compacted`): the points' time span.
    last_intended_ns: int | None = None
    # What the analysis' tasks read, laid out by slice: the sent parts indexed
    # (analysis.sentindex), the received compacted (analysis.compact). None until `compacted`.
    sent_copy: Copy | None = None
    received_copy: Copy | None = None
    slice_events: int = SLICE_EVENTS  # how the copies were sliced
    # The host's samples met with the run's processes' (analysis.hostload); None when the run
    # recorded none (before host samples, an import, a collect).
    host: HostTicks | None = None
    # Record files left out, each a copy of one read (runtime.parquet.checked_parts), as said.
    ignored: tuple[str, ...] = ()

    @property
    def compacted(self) -> bool:
        return self.sent_copy is not None and self.received_copy is not None


def sut_dirs(path: Path) -> list[Path]:
    """A SUT directory itself, or every SUT directory of a run directory."""
    if not path.exists():
        raise EvbenchError(f"{path}: no such directory")
    if SutDir(path).run_json.is_file():
        return [path]
    children = path.iterdir() if path.is_dir() else ()
    found = sorted(p for p in children if SutDir(p).run_json.is_file())
    if not found:
        raise EvbenchError(
            f"{path}: neither a SUT directory (run.json) nor a run with SUT directories"
        )
    return found


def never_started(sut_dir: Path) -> bool:
    """A SUT directory whose sender never started (say, the SUT failed to come up): no schedule
    start in run.json and no sent records."""
    try:
        run = read_run_json(sut_dir)
    except EvbenchError:
        return False  # unreadable or of another shape: check_inputs names the problem
    return not schedule_start_ns(run) and not part_files(SutDir(sut_dir).sent)


def read_run_json(sut_dir: Path) -> RunDoc:
    """run.json as its type says, its shape checked before anything reads into it (a file cut
    short or edited by hand is named in one line, never a traceback deep in the analysis);
    older documents lack keys: readers use `.get` for those."""
    path = SutDir(sut_dir).run_json
    what = "not as evbench writes run.json: restore it, or leave this run out"
    run = read_document(path, RunDoc)  # names a file that is no JSON object
    if missing := [key for key in RUN_JSON_NEEDS if key not in run]:
        raise EvbenchError(f"{path}: {', '.join(missing)}: missing: {what}")
    pace: object = run["pace"]
    strings = isinstance(run["run_id"], str) and isinstance(run["sut"], str)
    if not strings or not isinstance(pace, dict) or not isinstance(pace.get("steps"), list):
        why = "run_id and sut must be strings, pace an object with its steps"
        raise EvbenchError(f"{path}: {why}: {what}")
    return run


def check_inputs(sut_dir: Path) -> SutInputs:
    """Everything analysis needs from a SUT directory, checked without Spark (seconds saved on
    a bad path, and the error names the file)."""
    run = read_run_json(sut_dir)
    layout = SutDir(sut_dir)
    records = layout.analysis_records
    sent, copies = _checked_parts(
        layout.sent, SENT_FIELDS, lambda parts: sentindex.holds(records / "sent", parts)
    )
    received, more = _checked_parts(
        layout.received, RECEIVED_FIELDS, lambda parts: holds(records / "received", parts)
    )
    start_ns, source = schedule_start_ns(run), "run.json"
    if not start_ns and sent:
        start_ns, source = earliest_intended_ns(sent), "the earliest slot in sent/"
    if not start_ns:
        raise EvbenchError(
            f"{layout.run_json}: no schedule start and no sent records: the sender never "
            "started, nothing to analyse"
        )
    host = read_host_ticks(layout)
    found = SutInputs(sut_dir, run, int(start_ns), source, sent, received, host=host)
    return replace(found, ignored=copies + more)


def read_host_ticks(layout: SutDir) -> HostTicks | None:
    """The host samples of a run and the process samples of the same ticks (one row a second
    each: a day is 86,400 rows, read on the driver); None when it has no host samples."""
    host = part_files(layout.host_samples) if layout.host_samples.is_dir() else []
    if not host:
        return None
    processes = [p for p in part_files(layout.samples) if p.name.startswith("processes-")]
    return host_ticks(_rows(host, HOST_SAMPLE_FIELDS), _rows(processes, PROCESS_SAMPLE_FIELDS))


def _rows(paths: Sequence[Path], fields: Sequence[Field]) -> list[dict[str, object]]:
    names = [f.name for f in fields]
    rows: list[dict[str, object]] = []
    for path in paths:
        rows.extend(pq.read_table(path, columns=names).to_pylist())
    return rows


def _checked_parts(
    directory: Path, fields: Sequence[Field], held: Callable[[Sequence[Path]], bool]
) -> tuple[tuple[Path, ...], tuple[str, ...]]:
    """The part files of `directory`, each one's footer checked, unless what the analysis made
    of them (`held`: the received chunks, the sent index) holds them as they are now: their
    footers were checked before they were read, and a part changed since would show in its
    size or modification time (measured: 0.6 s to read the 4,680 footers of a 1k-2k matrix,
    20 ms to compare the manifest). And the copies left out, said: a copy's name is never in
    what the analysis made (it was left out then too), so a copy is always checked again."""
    parts = part_files(directory)
    if parts and held(parts):
        return tuple(parts), ()
    kept, copies = checked_parts(directory, fields)
    said = [f"{copy}: the same parts as {of.name} (a copy): ignored" for copy, of in copies]
    return tuple(kept), tuple(said)


def compacted(inputs: SutInputs, slice_events: int = SLICE_EVENTS) -> SutInputs:
    """`inputs` with its received parts compacted (analysis.compact) and its sent parts
    indexed (analysis.sentindex) in the SUT's analysis/records/:
    seconds of reading on the driver, which `evbench analyze` spends while Spark starts. Where
    they cannot be written, nor can the analysis' own files beside them: said, and nothing is
    analysed."""
    # A fan-out delivers each event once per subscriber: a slice of its events is as many
    # deliveries as a slice of a system of one (analysis.fanout).
    slice_events = max(1, slice_events // max(1, len(fanout_of(inputs.run))))
    if inputs.compacted and inputs.slice_events == slice_events:
        return inputs
    records = SutDir(inputs.path).analysis_records
    try:
        sent, received = _copies(inputs, records, slice_events)
    except OSError as exc:
        raise EvbenchError(
            f"{records}: cannot write the compacted records ({exc.strerror or exc}): the "
            "analysis writes its files in the system's directory; check its permissions and the "
            "disk's free space"
        ) from exc
    return replace(
        inputs,
        last_intended_ns=sent.last_intended_ns,
        sent_copy=sent,
        received_copy=received,
        slice_events=slice_events,
    )


def _copies(inputs: SutInputs, records: Path, slice_events: int) -> tuple[Copy, Copy]:
    # The single-file copies of earlier versions, superseded by the chunks.
    for old in ("sent.parquet", "received.parquet"):
        (records / old).unlink(missing_ok=True)
    sent = sentindex.index_sent(inputs.sent_parts, records / "sent", inputs.start_ns, slice_events)
    assert sent.ranges is not None  # a sent copy carries its slices' slot ranges
    received = compact_received(inputs.received_parts, records / "received", sent.ranges)
    return sent, received


def inputs_for(path: Path, echo: Callable[[str], None]) -> list[SutInputs]:
    """The SUT directories under `path` that can be analysed, checked; a run's systems that
    never started sending are skipped (and said so), a single one is an error."""
    targets = sut_dirs(path)
    if len(targets) > 1:
        skipped = [t for t in targets if never_started(t)]
        for sut_dir in skipped:
            echo(f"skipping {sut_dir.name}: it never started sending (see its run.json)")
        targets = [t for t in targets if t not in skipped]
        if not targets:
            raise EvbenchError(f"{path}: no system of this run started sending")
    return [check_inputs(t) for t in targets]


def earliest_intended_ns(sent_parts: Sequence[Path]) -> int | None:
    """The first slot in the sent records: slot 0 sits at the schedule start. For runs whose
    run.json lacks the start (recorded before the runner kept it when the sender died)."""
    lows = [
        pc.min(pq.read_table(path, columns=["intended_ns"])["intended_ns"]) for path in sent_parts
    ]
    values = [low.as_py() for low in lows if low.is_valid]
    return min(values, default=None)
