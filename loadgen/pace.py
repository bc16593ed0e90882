"""Pace model and parser (pure).

The 2019 syntax: comma-separated steps `rps[:duration]`, a missing duration meaning 10 s. evbench
also accepts `s`/`m` suffixes on durations, one or more steps per line, `#` comments and blank
lines, so a pace file can explain itself. Errors name the offending token and where it stands.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from contract.errors import PaceError

DEFAULT_STEP_SECONDS = 10
_DURATION = re.compile(r"^(?P<number>\d+(?:\.\d+)?)(?P<unit>[sm]?)$")
_RATE = re.compile(r"^\d+$")


@dataclass(frozen=True)
class Step:
    rate_per_s: int
    duration_s: int

    @property
    def events(self) -> int:
        return self.rate_per_s * self.duration_s

    def spec(self) -> str:
        return f"{self.rate_per_s}:{self.duration_s}"


@dataclass(frozen=True)
class Pace:
    name: str
    steps: tuple[Step, ...]

    @property
    def spec(self) -> str:
        """Canonical 2019-style spec, e.g. `1000:30,1100:30`."""
        return ",".join(step.spec() for step in self.steps)

    @property
    def duration_s(self) -> int:
        return sum(step.duration_s for step in self.steps)

    @property
    def events(self) -> int:
        return sum(step.events for step in self.steps)


def parse_step(token: str, where: str) -> Step:
    """One `rps[:duration]` token; `where` says where it stands, for the error message."""
    rate_text, sep, duration_text = token.partition(":")
    rate_text, duration_text = rate_text.strip(), duration_text.strip()
    if not _RATE.match(rate_text):
        raise PaceError(f"{where}: bad step '{token}': rate must be a whole number of events/s")
    rate = int(rate_text)
    if rate <= 0:
        raise PaceError(f"{where}: bad step '{token}': rate must be greater than zero")
    if not sep:
        return Step(rate, DEFAULT_STEP_SECONDS)
    match = _DURATION.match(duration_text)
    if not match:
        raise PaceError(f"{where}: bad step '{token}': duration must look like 30, 30s or 6m")
    seconds = float(match["number"]) * (60 if match["unit"] == "m" else 1)
    if seconds <= 0:
        raise PaceError(f"{where}: bad step '{token}': duration must be greater than zero")
    if seconds != int(seconds):
        raise PaceError(f"{where}: bad step '{token}': duration must be whole seconds")
    return Step(rate, int(seconds))


def parse_pace(text: str, name: str = "inline", source: str = "pace") -> Pace:
    """Parse a pace file's text or an inline spec such as `500:10,1000:10`."""
    steps: list[Step] = []
    for line_number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.split("#", 1)[0]
        tokens = line.split(",")
        column = 1
        for index, token in enumerate(tokens):
            stripped = token.strip()
            token_column = column + (len(token) - len(token.lstrip()))
            column += len(token) + 1
            if not stripped:
                # Blank lines and a comma ending a line are fine; any other empty step is a typo.
                trailing = index == len(tokens) - 1
                if line.strip() and not trailing:
                    raise PaceError(
                        f"{source}:{line_number}:{token_column}: empty step (stray comma?)"
                    )
                continue
            where = f"{source}:{line_number}:{token_column} (step {len(steps) + 1})"
            steps.append(parse_step(stripped, where))
    if not steps:
        raise PaceError(f"{source}: no steps: a pace needs at least one `rate[:seconds]` step")
    return Pace(name, tuple(steps))


def parse_warmup(text: str) -> Step:
    """`10s@100` (or `10@100`): 10 seconds at 100 events/s."""
    duration_text, sep, rate_text = text.partition("@")
    if not sep:
        raise PaceError(f"warmup '{text}': expected DURATION@RATE, e.g. 10s@100")
    return parse_step(f"{rate_text}:{duration_text}", f"warmup '{text}'")


def default_paces_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "paces"


def resolve_pace(name_or_spec: str, paces_dir: Path | None = None) -> Pace:
    """A pace by file name in `paces_dir` (`1k-2k`, `1k-2k.pace`) or an inline spec."""
    directory = paces_dir or default_paces_dir()
    stem = name_or_spec.removesuffix(".pace")
    path = directory / f"{stem}.pace"
    if re.fullmatch(r"[A-Za-z0-9_.-]+", stem) and path.is_file():
        return parse_pace(path.read_text(), name=stem, source=str(path))
    looks_like_spec = ":" in name_or_spec or "," in name_or_spec or name_or_spec.strip().isdigit()
    if not looks_like_spec:
        known = ", ".join(p.stem for p in list_pace_files(directory)) or "none"
        raise PaceError(
            f"unknown pace '{name_or_spec}': not a file in {directory} (known: {known}) "
            "and not a spec such as 500:10,1000:10"
        )
    return parse_pace(name_or_spec, name=inline_name(name_or_spec), source="pace")


def inline_name(spec: str) -> str:
    """A directory-safe name for an inline spec: `500:10,1000:10` -> `500x10-1000x10`."""
    slug = re.sub(r"[^0-9a-z]+", "-", spec.strip().lower().replace(":", "x")).strip("-")
    return slug if len(slug) <= 40 else f"custom-{zlib.crc32(spec.encode()):08x}"


def list_pace_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.pace")) if directory.is_dir() else []
