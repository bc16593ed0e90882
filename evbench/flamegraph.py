"""py-spy's collapsed stacks turned into the two forms a run directory keeps: a static SVG
flame graph and a speedscope file. Pure functions: text in, text or a dict out, no I/O.

`py-spy record --format raw` writes Brendan Gregg's collapsed stacks (flamegraph.pl's input):
one line per distinct stack, its frames root-first joined by ';', then whitespace and the
number of samples, e.g. `<module> (app.py:6);main (app.py:3);work (app.py:10) 162`. A frame's
text may hold spaces (never ';'); with `--threads` a thread frame leads and is a frame like
any other.

The flame graph follows flamegraph.pl: an `all` frame at the bottom spans every sample, each
frame is as wide as its inclusive samples, siblings are sorted by name, frames narrower than
0.1 px are left out, and the colours are the "hot" palette chosen by a hash of the function
name (SHA-1, so the same function has the same colour in every run and process). Hovering a
frame shows its `<title>`: `frame (N samples, P%)`. No script is needed.

In the speedscope file a frame `func (file.py:12)` becomes `{"name": "func", "file":
"file.py", "line": 12}` (as py-spy's own speedscope output names it), any other frame
`{"name": text}`; the frame's text is `f"{name} ({file}:{line})"` or `name` again.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, NotRequired, TypedDict

Stacks = Mapping[tuple[str, ...], int]

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"

_COUNT = re.compile(r"[0-9]+")  # ASCII digits only (str.isdigit takes '²' too)
_FILE_LINE = re.compile(r"(?P<func>.+) \((?P<file>[^()]+):(?P<line>0|[1-9][0-9]*)\)")
# Characters XML 1.0 forbids (controls, lone surrogates, U+FFFE/U+FFFF), replaced by U+FFFD.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

_PAD_PX = 10  # left, right and bottom margins
_TOP_PX = 60  # the title and the total above the frames
_FRAME_PX = 16  # one level of the stack (the rect is 1 px less: a gap between levels)
_FONT_PX = 12
_CHAR_PX = 0.59 * _FONT_PX  # flamegraph.pl's estimate of a character's width
_TEXT_INSET_PX = 3
_MIN_FRAME_PX = 0.1
_SHORTEN_TO = 80


class SpeedscopeFrame(TypedDict):
    name: str
    file: NotRequired[str]
    line: NotRequired[int]


class SpeedscopeShared(TypedDict):
    frames: list[SpeedscopeFrame]


class SpeedscopeProfile(TypedDict):
    type: Literal["sampled"]
    name: str
    unit: Literal["none"]
    startValue: int
    endValue: int
    samples: list[list[int]]
    weights: list[int]


SpeedscopeFile = TypedDict(
    "SpeedscopeFile",
    {
        "$schema": str,
        "shared": SpeedscopeShared,
        "profiles": list[SpeedscopeProfile],
        "name": str,
        "activeProfileIndex": int,
        "exporter": str,
    },
)


# --- parsing -----------------------------------------------------------------------------


def parse_collapsed(text: str) -> dict[tuple[str, ...], int]:
    """Stacks (frames root-first) to sample counts; a stack on several lines adds up; blank
    lines are skipped; a bare count is a sample without frames. A line whose last token is
    not a non-negative integer raises ValueError naming its number and (shortened) text."""
    stacks: dict[tuple[str, ...], int] = {}
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line:
            continue
        parts = line.rsplit(None, 1)
        if len(parts) == 1 and _COUNT.fullmatch(parts[0]):
            # py-spy writes a sample it caught between frames (--nonblocking) with no frames:
            # it counts toward the whole, as flamegraph.pl counts it under "all".
            parts = ["", parts[0]]
        elif len(parts) != 2 or not _COUNT.fullmatch(parts[1]):
            raise ValueError(
                f"collapsed stacks, line {number}: expected 'frame;frame;... count' with a "
                f"non-negative integer count, got {_shorten(line)!r}"
            )
        stack = tuple(parts[0].split(";")) if parts[0] else ()
        stacks[stack] = stacks.get(stack, 0) + int(parts[1])
    return stacks


def total_samples(stacks: Stacks) -> int:
    """Every sample of every stack."""
    return sum(stacks.values())


def _shorten(line: str) -> str:
    """The line's head and tail (the count is at the end) when it is too long to quote."""
    if len(line) <= _SHORTEN_TO:
        return line
    tail = _SHORTEN_TO // 2 - 5
    return f"{line[: _SHORTEN_TO - tail - 5]} ... {line[-tail:]}"


def _check_counts(stacks: Stacks) -> None:
    for stack, count in stacks.items():
        if count < 0:
            raise ValueError(f"stack {';'.join(stack)!r} has a negative count ({count})")


def _function(frame: str) -> str:
    """`func` of `func (file.py:12)`, else the frame's whole text."""
    match = _FILE_LINE.fullmatch(frame)
    return match["func"] if match else frame


# --- the flame graph ---------------------------------------------------------------------


@dataclass
class _Node:
    name: str
    total: int = 0
    children: dict[str, _Node] = field(default_factory=dict)


@dataclass(frozen=True)
class _Box:
    """A frame as drawn: its level (0 at the bottom), left edge and width in px."""

    name: str
    samples: int
    depth: int
    x: float
    width: float


def _tree(stacks: Stacks) -> _Node:
    root = _Node("all")
    for stack, count in stacks.items():
        root.total += count
        node = root
        for frame in stack:
            node = node.children.setdefault(frame, _Node(frame))
            node.total += count
    return root


def _boxes(root: _Node, px_per_sample: float) -> list[_Box]:
    """Every frame wide enough to draw, children left to right by name, bottom level first.
    Iterative: Python stacks can be deeper than Python's recursion limit."""
    boxes: list[_Box] = []
    todo: list[tuple[_Node, int, float]] = [(root, 0, float(_PAD_PX))]
    while todo:
        node, depth, x = todo.pop()
        width = node.total * px_per_sample
        if width < _MIN_FRAME_PX:
            continue  # and its children, narrower still
        boxes.append(_Box(node.name, node.total, depth, x, width))
        child_x = x
        for name in sorted(node.children):
            child = node.children[name]
            todo.append((child, depth + 1, child_x))
            child_x += child.total * px_per_sample
    return sorted(boxes, key=lambda box: (box.depth, box.x))


def _escape(text: str) -> str:
    return html.escape(_NOT_XML.sub("\ufffd", text), quote=True)


def _samples(count: int) -> str:
    return f"{count} sample" if count == 1 else f"{count} samples"


def _colour(frame: str) -> str:
    """flamegraph.pl's "hot" palette, chosen by a stable hash of the function name."""
    name = _function(frame).encode("utf-8", "surrogatepass")
    v1, v2, v3 = (byte / 255 for byte in hashlib.sha1(name, usedforsecurity=False).digest()[:3])
    return f"rgb({205 + round(50 * v3)},{round(230 * v1)},{round(55 * v2)})"


def _label(name: str, width: float) -> str:
    """The name as it fits in the frame: whole, cut with '..', or nothing under 3 chars."""
    fits = int((width - 2 * _TEXT_INSET_PX) / _CHAR_PX)
    if fits < 3:
        return ""
    return name if len(name) <= fits else name[: fits - 2] + ".."


def _frame_svg(box: _Box, total: int, y: float) -> str:
    tip = f"{box.name} ({_samples(box.samples)}, {100 * box.samples / total:.2f}%)"
    label = _label(box.name, box.width)
    text = (
        f'<text x="{box.x + _TEXT_INSET_PX:.2f}" y="{y + _FRAME_PX - 4.5:.2f}">'
        f"{_escape(label)}</text>"
        if label
        else ""
    )
    return (
        f'<g class="frame"><title>{_escape(tip)}</title>'
        f'<rect x="{box.x:.2f}" y="{y:.2f}" width="{box.width:.2f}" height="{_FRAME_PX - 1}"'
        f' fill="{_colour(box.name)}" rx="2" ry="2"/>{text}</g>'
    )


def _document(title: str, subtitle: str, width: int, height: int, frames: list[str]) -> str:
    middle = width / 2
    return "\n".join(
        [
            '<?xml version="1.0" encoding="UTF-8"?>',
            f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}"'
            f' height="{height}" viewBox="0 0 {width} {height}"'
            f' font-family="Verdana, sans-serif" font-size="{_FONT_PX}"'
            ' style="background-color: #f8f8f8">',
            f"<title>{_escape(title)}</title>",
            "<style>.frame rect { stroke: #f8f8f8; stroke-width: 0.5 }"
            " .frame:hover rect { stroke: #000 }</style>",
            f'<text class="title" x="{middle:.1f}" y="24" text-anchor="middle"'
            f' font-size="{_FONT_PX + 5}">{_escape(title)}</text>',
            f'<text class="total" x="{middle:.1f}" y="44" text-anchor="middle"'
            f' fill="#555">{_escape(subtitle)}</text>',
            *frames,
            "</svg>",
            "",
        ]
    )


def flamegraph_svg(stacks: Stacks, title: str, width_px: int = 1200) -> str:
    """A self-contained static SVG flame graph of the stacks: the title and the total at the
    top, the root (`all`) at the bottom; the same stacks give the same text, byte for byte.
    No samples (or only zero counts) gives a valid SVG that says "no samples"."""
    if width_px <= 2 * _PAD_PX:
        raise ValueError(f"a flame graph {width_px} px wide has no room for frames")
    _check_counts(stacks)
    root = _tree(stacks)
    if root.total == 0:
        return _document(title, "no samples", width_px, _TOP_PX + _PAD_PX, [])
    boxes = _boxes(root, (width_px - 2 * _PAD_PX) / root.total)
    height = _TOP_PX + (boxes[-1].depth + 1) * _FRAME_PX + _PAD_PX
    frames = [
        _frame_svg(box, root.total, height - _PAD_PX - (box.depth + 1) * _FRAME_PX) for box in boxes
    ]
    return _document(title, _samples(root.total), width_px, height, frames)


# --- speedscope ---------------------------------------------------------------------------


def _speedscope_frame(frame: str) -> SpeedscopeFrame:
    match = _FILE_LINE.fullmatch(frame)
    if match is None:
        return {"name": frame}
    return {"name": match["func"], "file": match["file"], "line": int(match["line"])}


def speedscope_json(stacks: Stacks, name: str) -> SpeedscopeFile:
    """A speedscope file (SPEEDSCOPE_SCHEMA) with one sampled profile: a sample per distinct
    stack (sorted, so the same stacks give the same file), weighted by its count; frames are
    shared and listed once each, in the order they are first met."""
    _check_counts(stacks)
    index: dict[str, int] = {}
    frames: list[SpeedscopeFrame] = []
    samples: list[list[int]] = []
    weights: list[int] = []
    for stack in sorted(stacks):
        for frame in stack:
            if frame not in index:
                index[frame] = len(frames)
                frames.append(_speedscope_frame(frame))
        samples.append([index[frame] for frame in stack])
        weights.append(stacks[stack])
    profile: SpeedscopeProfile = {
        "type": "sampled",
        "name": name,
        "unit": "none",
        "startValue": 0,
        "endValue": sum(weights),
        "samples": samples,
        "weights": weights,
    }
    return {
        "$schema": SPEEDSCOPE_SCHEMA,
        "shared": {"frames": frames},
        "profiles": [profile],
        "name": name,
        "activeProfileIndex": 0,
        "exporter": "evbench",
    }
