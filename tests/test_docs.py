"""The docs hold together: every relative link in README.md and docs/*.md points at a file (and
heading) that exists, every `docs/design.md §N` the code cites names a section of it, and
docs/cli.md names every command and flag the parsers have. Pure: files are read, nothing runs."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from evbench.cli import build_parser
from loadgen.__main__ import build_parser as sender_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]
# Importing the fleet's parser would import Locust, which monkey-patches the test process for
# gevent: its roles' own flags are read from the source instead.
FLEET_ROLES = {
    "master": ROOT / "loadgen" / "fleet" / "__main__.py",
    "worker": ROOT / "loadgen" / "fleet" / "worker.py",
}
FLEET_FLAG = re.compile(r'add_argument\(\s*"(--[a-z-]+)"')
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CITATION = re.compile(r"(docs/design\.md |DESIGN )§(\d+)")


def _prose(text: str) -> str:
    """The page without its fenced code blocks (a `# comment` in a shell block is no heading)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for line in _prose(page.read_text()).splitlines():
        if line.startswith("#"):
            base = slug(line.lstrip("#"))
            name, n = base, 0
            while name in found:  # a repeated heading gets -1, -2, ...
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def test_there_are_docs_and_the_readme_links_to_each() -> None:
    readme = (ROOT / "README.md").read_text()
    assert DOCS, "docs/ holds no page"
    unlinked = [p.name for p in DOCS if f"(docs/{p.name}" not in readme]
    assert not unlinked, f"README.md's 'Where to read on' does not link {unlinked}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading with that anchor in {file.name}")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def code_dirs() -> list[Path]:
    """Every top-level folder of the project's own code (whatever the floors are named)."""
    return [
        d
        for d in ROOT.iterdir()
        if d.is_dir()
        and not d.name.startswith(".")
        and d.name not in ("runs", "docs")
        and not d.name.endswith(".egg-info")
    ]


def design_sections() -> set[str]:
    text = _prose((ROOT / "docs" / "design.md").read_text())
    return set(re.findall(r"^## (\d+)\. ", text, flags=re.M))


def test_every_design_citation_in_the_code_names_a_section() -> None:
    sections = design_sections()
    assert {"2", "3", "4", "5"} <= sections, f"docs/design.md's sections: {sorted(sections)}"
    wrong = []
    for top in code_dirs():
        for path in top.rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                for prefix, section in CITATION.findall(line):
                    if prefix.startswith("DESIGN") or section not in sections:
                        wrong.append(f"{path.relative_to(ROOT)}:{n}: {prefix}§{section}")
    assert not wrong, f"citations of no section of docs/design.md: {wrong}"


def _choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {
        flag
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for flag in action.option_strings
        if flag not in ("-h", "--help")
    }


def commands() -> dict[str, set[str]]:
    """Every command as `evbench COMMAND` and its flags; `send` is the sender's own parser (the
    CLI hands it over), and a fleet's master and worker are roles of it."""
    found = {name: _flags(p) for name, p in _choices(build_parser()).items()}
    found["send"] = _flags(sender_parser())
    for role, source in FLEET_ROLES.items():
        found[f"send --{role}"] = set(FLEET_FLAG.findall(source.read_text()))
        assert found[f"send --{role}"], f"no flag read from {source}: the pattern is stale"
    return found


def test_the_cli_reference_names_every_command_and_flag() -> None:
    reference = (ROOT / "docs" / "cli.md").read_text()
    headings = set(re.findall(r"^#+ evbench (.+?)(?: \(|$)", reference, flags=re.M))
    missing = []
    for command, flags in commands().items():
        if command not in headings:
            missing.append(f"no heading for `evbench {command}`")
        missing += [f"{command} {f}" for f in sorted(flags) if f"`{f}" not in reference]
    assert not missing, f"docs/cli.md lacks: {missing}"
