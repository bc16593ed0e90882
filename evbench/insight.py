"""What a session sees inside the system: the Prometheus endpoints it scrapes (the user's
`--scrape`, and a lab system's own /metrics by default) and the step it profiles (`--profile`,
`--pprof`). The session starts it, tells it when a system starts and stops and when a sender
announces its schedule, and stops it; run.json gets its account (contract.insight)."""

from __future__ import annotations

from collections.abc import Callable

from contract.documents import RunDoc
from contract.insight import ProfileDoc, ScrapeDoc
from contract.layout import SutDir
from contract.lines import SenderStart
from evbench.options import SessionOptions
from evbench.profiles import Profiler
from evbench.scrape import Scraper, ScrapeTarget
from suts.driver import Sut


class Insight:
    def __init__(self, opts: SessionOptions, sut_dir: SutDir, echo: Callable[[str], None]):
        self.opts = opts
        self.scraper = Scraper(sut_dir.scraped_metrics, opts.scrape_interval_s)
        self.profiler = Profiler(sut_dir, opts.profile, opts.pprof, self._lab_pids, echo)
        self._pids: dict[str, int] = {}

    def start(self) -> None:
        for target in self.opts.scrape:
            self.scraper.add(target)

    def attach(self, sut: Sut) -> None:
        """A system started: its processes' own /metrics scraped, its Python processes the
        ones a profile samples."""
        taken = {target.name for target in self.opts.scrape}
        for role, url in sut.metrics_endpoints().items():
            name = f"lab-{role}" if role in taken else role
            self.scraper.add(ScrapeTarget(name, url, "lab"))
        self._pids = {role: part.child.pid for role, part in sut.components.items()}

    def detach(self) -> None:
        """The system is stopping: its endpoints are no longer scraped (a stopping process
        that does not answer is not a failed scrape)."""
        self.scraper.remove_origin("lab")
        self._pids = {}

    def on_sender_start(self, line: SenderStart) -> None:
        self.profiler.on_schedule(line["start_ns"], line["steps"])

    def stop(self) -> None:
        self.profiler.stop()
        self.scraper.stop()

    def _lab_pids(self) -> dict[str, int]:
        return dict(self._pids)

    def scrapes(self) -> list[ScrapeDoc]:
        return self.scraper.docs()

    def profiles(self) -> list[ProfileDoc]:
        return self.profiler.docs()

    def describe(self, doc: RunDoc) -> None:
        """run.json's account of both (absent when nothing was asked or scraped)."""
        if scrapes := self.scrapes():
            doc["scrapes"] = scrapes
        if profiles := self.profiles():
            doc["profiles"] = profiles
