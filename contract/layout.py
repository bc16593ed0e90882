"""Where a run's files live; every reader and writer asks here (data only: making and listing
directories is runtime.runs').

runs/<run-id>-<pace>/index.html
runs/<run-id>-<pace>/<sut>/{run.json, sent/, received/, samples/[host/, consumer-lag/, metrics/],
                            profiles/step-<N>/, logs/,
                            analysis/{summary.json, metrics.parquet, ..., report.html, knative/,
                                      hdr/[step-<N>/]}}
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from contract.errors import EvbenchError


@dataclass(frozen=True)
class SutDir:
    root: Path

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def sent(self) -> Path:
        return self.root / "sent"

    @property
    def received(self) -> Path:
        return self.root / "received"

    @property
    def samples(self) -> Path:
        return self.root / "samples"

    @property
    def host_samples(self) -> Path:
        """The host as a whole, in the process samples' ticks (contract.records'
        HOST_SAMPLE_FIELDS): a folder of its own, so samples/ holds process samples only."""
        return self.samples / "host"

    @property
    def consumer_lag(self) -> Path:
        return self.samples / "consumer-lag"

    @property
    def scraped_metrics(self) -> Path:
        """Prometheus samples scraped during the run (contract.records.METRIC_SAMPLE_FIELDS)."""
        return self.samples / "metrics"

    @property
    def profiles(self) -> Path:
        return self.root / "profiles"

    def step_profiles(self, step: int) -> Path:
        """Profiles taken during one step (py-spy's, pprof's), stored as they come."""
        return self.profiles / f"step-{step}"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    # what `evbench analyze` writes (raw files are never edited)
    @property
    def analysis(self) -> Path:
        return self.root / "analysis"

    @property
    def analysis_records(self) -> Path:
        """What the analysis makes of sent/ and received/ (analysis.sentindex, .compact)."""
        return self.analysis / "records"

    @property
    def summary_json(self) -> Path:
        return self.analysis / "summary.json"

    @property
    def metrics_parquet(self) -> Path:
        return self.analysis / "metrics.parquet"

    @property
    def cumulative_parquet(self) -> Path:
        return self.analysis / "cumulative.parquet"

    @property
    def points_parquet(self) -> Path:
        return self.analysis / "points.parquet"

    @property
    def digests_parquet(self) -> Path:
        return self.analysis / "digests.parquet"

    @property
    def steps_csv(self) -> Path:
        return self.analysis / "steps.csv"

    @property
    def report_html(self) -> Path:
        return self.analysis / "report.html"

    @property
    def knative_export(self) -> Path:
        return self.analysis / "knative"

    @property
    def hdr_export(self) -> Path:
        """`--export-hdr`'s HdrHistogram interval logs (analysis.hdr)."""
        return self.analysis / "hdr"

    def hdr_log(self, metric: str, step: int | None = None) -> Path:
        """One of them: the whole run's (`step` None), or one step's in a folder of its own."""
        folder = self.hdr_export if step is None else self.hdr_export / f"step-{step}"
        return folder / f"{metric}.hlog"


def run_index_html(run_dir: Path) -> Path:
    """The page that shows every SUT of a run side by side."""
    return run_dir / "index.html"


# Each component stays well under NAME_MAX (255 bytes on Linux and macOS), so a run directory
# name, `<run id>-<pace name>`, always fits too.
MAX_COMPONENT_CHARS = 100
# ASCII letters and digits first: no '.', '..', hidden files or names read as options; no
# separators, so a component can never leave its directory; nothing HTML or a shell treats
# specially, so names are safe wherever they are shown.
_COMPONENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
COMPONENT_RULE = (
    f"1 to {MAX_COMPONENT_CHARS} characters: ASCII letters, digits, '.', '_' or '-', "
    "starting with a letter or digit"
)


def safe_component(kind: str, value: str) -> str:
    """`value` when it is safe as one path component (a run id, SUT name, pace name or file
    name a user chose); otherwise an EvbenchError naming `kind`, the value and the rule.

    The one place user strings become path components: checked before anything is written."""
    if len(value) > MAX_COMPONENT_CHARS:
        shown = f"{value[:20]!r}… ({len(value)} characters)"
    elif not _COMPONENT.fullmatch(value):
        shown = repr(value)
    else:
        return value
    raise EvbenchError(f"{kind} {shown} is not allowed: use {COMPONENT_RULE}")


def repeat_dir_name(sut: str, index: int, of: int) -> str:
    """A system's directory name in a run: its name, or with `--repeat N` (N > 1) its name and
    the repeat's number, `channel-imc.repeat-2` (run.json's `repeat` says the same)."""
    # Zero-padded to the count's width, so that directories sort in repeat order.
    return sut if of <= 1 else f"{sut}.repeat-{index:0{len(str(of))}d}"


def fanout_dir_name(sut: str, fanout: int, fanouts: tuple[int, ...]) -> str:
    """A system's directory name in a campaign over fan-outs (`--subscribers 1,10,50`): its
    name alone when there is one value, else with the item's, `broker-imc.fanout-10`
    (run.json's `sut_settings.subscribers` says the same)."""
    # Zero-padded to the largest's width, so that directories sort in the order of N.
    width = len(str(max(fanouts, default=fanout)))
    return sut if len(fanouts) <= 1 else f"{sut}.fanout-{fanout:0{width}d}"


def sut_dir_for(runs_dir: Path, run_id: str, pace_name: str, sut: str) -> SutDir:
    """Where a system's results of a run go (nothing is created)."""
    run_name = f"{safe_component('run id', run_id)}-{safe_component('pace name', pace_name)}"
    return SutDir(runs_dir / run_name / safe_component("SUT name", sut))
