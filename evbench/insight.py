"""What a session sees inside the system: the Prometheus endpoints it scrapes (the user's
`--scrape`, and a lab system's own /metrics by default) and the step it profiles (`--profile`,
`--pprof`). The session starts it, tells it when a system starts and stops and when a sender
announces its schedule, and stops it; run.json gets its account (contract.insight)."""

from __future__ import annotations

from collections.abc import Callable

from contract.documents import RunDoc
from contract.errors import EvbenchError
from contract.insight import ProfileDoc, ScrapeDoc
from contract.layout import SutDir
from contract.senderlines import SenderStart
from evbench.options import SessionOptions
from evbench.profiles import Profiler
from evbench.scrape import Scraper, ScrapeTarget
from suts.driver import Sut
from suts.lab import driver_for


def check_profile(opts: SessionOptions, first_step: int, last_step: int | None) -> None:
    """`--profile STEP` names a step the session will have (a search's probes have no last)
    and something to profile, before anything starts."""
    if opts.profile is None:
        return
    step = opts.profile.step
    if step < first_step or (last_step is not None and step > last_step):
        steps = f"{first_step}..{last_step}" if last_step is not None else f"{first_step} on"
        raise EvbenchError(f"--profile {step}: this session's steps are {steps}")
    if not opts.pprof and not driver_for(opts.sut).lab_processes:
        raise EvbenchError(
            f"--profile {step}: {opts.sut} has no lab processes here to profile; add "
            "--pprof NAME=URL for a Go service of yours (its CPU and heap profiles)"
        )


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
        try:
            self.profiler.stop()
        finally:  # the endpoints are stopped (and accounted for) whatever the profiles met
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
