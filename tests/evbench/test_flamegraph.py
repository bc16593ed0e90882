"""py-spy's collapsed stacks parsed, drawn as a static SVG flame graph and written as a
speedscope file (evbench.flamegraph): pure functions, checked table by table."""

import json
import re
import xml.etree.ElementTree as ET

import pytest

from evbench.flamegraph import (
    SPEEDSCOPE_SCHEMA,
    flamegraph_svg,
    parse_collapsed,
    speedscope_json,
    total_samples,
)

SVG = "{http://www.w3.org/2000/svg}"
TIP = re.compile(r"(?P<frame>.*) \((?P<n>[0-9]+) samples?, (?P<pct>[0-9.]+)%\)", re.DOTALL)

# What `py-spy record --format raw --threads` wrote for a small script.
PY_SPY = """\
thread (28912);<module> (app.py:11);main (app.py:10);work (app.py:5) 123
thread (28912);<module> (app.py:11);main (app.py:10);work (app.py:4) 38
thread (28912);<module> (app.py:11);main (app.py:10) 1
"""
PY_SPY_STACKS = {
    ("thread (28912)", "<module> (app.py:11)", "main (app.py:10)", "work (app.py:5)"): 123,
    ("thread (28912)", "<module> (app.py:11)", "main (app.py:10)", "work (app.py:4)"): 38,
    ("thread (28912)", "<module> (app.py:11)", "main (app.py:10)"): 1,
}

# --- parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "stacks"),
    [
        ("", {}),
        ("main 1", {("main",): 1}),
        (PY_SPY, PY_SPY_STACKS),
        (  # frames hold spaces, '<', '>' and parentheses; ';' only separates
            "<module> (app.py:6);main (app.py:3);work (app.py:10) 162\n",
            {("<module> (app.py:6)", "main (app.py:3)", "work (app.py:10)"): 162},
        ),
        ("a;b 2\na;c 1\na;b 3\n", {("a", "b"): 5, ("a", "c"): 1}),  # repeated stacks add up
        ("\n\n  \na;b 2\n\t\n\na 1\n\n", {("a", "b"): 2, ("a",): 1}),  # blank lines skipped
        ("a;b 2\r\na 1\r\n", {("a", "b"): 2, ("a",): 1}),  # CRLF
        ("a;b\t7", {("a", "b"): 7}),  # any whitespace before the count
        ("idle (x.py:1) 0", {("idle (x.py:1)",): 0}),  # zero is a count
        ("a;b 000012", {("a", "b"): 12}),
        # py-spy --nonblocking: a sample caught between frames comes with none
        ("a 2\n 1\n", {("a",): 2, (): 1}),
        ("a; b 4", {("a", " b"): 4}),  # a frame's own spaces are kept
        ('"MainThread" (0x7f);f (a b.py:9) 3', {('"MainThread" (0x7f)', "f (a b.py:9)"): 3}),
    ],
)
def test_collapsed_stacks_are_counted_per_stack(text, stacks):
    assert parse_collapsed(text) == stacks


@pytest.mark.parametrize(
    ("text", "line_number", "quoted"),
    [
        ("main 1.5", 1, "main 1.5"),
        ("a 1\nmain -3", 2, "main -3"),
        ("a 1\n\nmain abc\n", 3, "main abc"),
        ("main", 1, "main"),  # no count at all
        ("main \uff13", 1, "main \uff13"),  # a digit (fullwidth 3), but not an ASCII one
        ("main 1e3", 1, "main 1e3"),
        ("main +4", 1, "main +4"),
    ],
)
def test_a_line_without_a_count_names_its_number_and_text(text, line_number, quoted):
    with pytest.raises(ValueError, match=f"line {line_number}:") as raised:
        parse_collapsed(text)
    assert repr(quoted) in str(raised.value)


def test_a_long_bad_line_is_quoted_shortened_with_its_end():
    line = ";".join(f"frame_{i} (module_{i}.py:{i})" for i in range(200)) + " many"
    with pytest.raises(ValueError, match="line 1:") as raised:
        parse_collapsed(line)
    message = str(raised.value)
    assert len(message) < 200
    assert "frame_0 (module_0.py:0)" in message and message.endswith(" many'")


@pytest.mark.parametrize(
    ("stacks", "total"),
    [({}, 0), ({("a",): 0}, 0), (PY_SPY_STACKS, 162), ({("a",): 3, ("a", "b"): 4}, 7)],
)
def test_total_samples(stacks, total):
    assert total_samples(stacks) == total


# --- the flame graph -----------------------------------------------------------------------


def frames(svg: str) -> dict[str, dict[str, str]]:
    """Frame name to its rect's attributes, its hover text (samples, percent) and label."""
    found = {}
    for group in ET.fromstring(svg).iter(f"{SVG}g"):
        tip = TIP.fullmatch(group.findtext(f"{SVG}title") or "")
        assert tip is not None, f"a frame without a hover text: {ET.tostring(group)!r}"
        rect = group.find(f"{SVG}rect")
        assert rect is not None
        label = group.findtext(f"{SVG}text") or ""
        found[tip["frame"]] = {**rect.attrib, "n": tip["n"], "pct": tip["pct"], "label": label}
    return found


def texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).findall(f"{SVG}text")]


@pytest.mark.parametrize(
    "stacks",
    [
        {},
        {("main",): 0},
        {("main",): 1},
        PY_SPY_STACKS,
        {("<module> (a&b.py:1)", "f \"quoted\" 'single'", "g <lambda> ]]>"): 3},
        {("ctrl\x01\x1f char", "lone \udc80 surrogate", "\ufffe"): 2},  # not allowed in XML
        {tuple(f"f{i} (deep.py:{i})" for i in range(2000)): 5},  # deeper than recursion
        {("a",): 10**12, ("a", "b"): 1},  # frames narrower than 0.1 px
    ],
)
def test_the_flame_graph_is_well_formed_and_every_frame_has_a_hover_text(stacks):
    svg = flamegraph_svg(stacks, "profile <step 1> & more")
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    groups = list(root.iter(f"{SVG}g"))
    assert len(list(root.iter(f"{SVG}rect"))) == len(groups)  # every rect is in a frame
    assert all(len(g.findall(f"{SVG}rect")) == 1 for g in groups)
    frames(svg)  # and each frame says "frame (N samples, P%)"


@pytest.mark.parametrize(
    ("share", "width_px"),
    [(3 / 4, 1200), (3 / 4, 400), (1 / 2, 1200), (9 / 10, 800), (1 / 3, 1000)],
)
def test_a_frame_is_as_wide_as_its_share_of_the_samples(share, width_px):
    total = 120
    big = round(total * share)
    svg = flamegraph_svg({("main", "big"): big, ("main", "small"): total - big}, "t", width_px)
    found = frames(svg)
    full = width_px - 20  # margins of 10 px
    assert float(found["all"]["width"]) == pytest.approx(full, abs=0.01)
    assert float(found["main"]["width"]) == pytest.approx(full, abs=0.01)
    assert float(found["big"]["width"]) == pytest.approx(full * big / total, abs=0.01)
    assert float(found["small"]["width"]) == pytest.approx(full * (1 - big / total), abs=0.01)
    assert found["big"]["n"] == str(big)
    assert float(found["big"]["pct"]) == pytest.approx(100 * big / total, abs=0.005)


def test_the_root_is_at_the_bottom_and_children_sit_left_to_right_by_name():
    # "zeta" is the widest and first written; names decide the order, as in flamegraph.pl
    stacks = {("main", "zeta"): 5, ("main", "alpha"): 1, ("main", "mid"): 2, ("main",): 2}
    found = frames(flamegraph_svg(stacks, "t"))
    ys = [float(found[name]["y"]) for name in ("all", "main", "zeta")]
    assert ys[0] > ys[1] > ys[2]  # SVG's y grows downwards
    xs = [float(found[name]["x"]) for name in ("alpha", "mid", "zeta")]
    assert xs == sorted(xs) and xs[0] == float(found["main"]["x"])
    # each child starts where its left sibling ends; main's own samples are on the right
    assert xs[1] == pytest.approx(xs[0] + float(found["alpha"]["width"]), abs=0.01)
    end = float(found["zeta"]["x"]) + float(found["zeta"]["width"])
    assert end == pytest.approx(10 + 1180 * 8 / 10, abs=0.01)


def test_the_title_and_the_total_are_above_the_frames():
    svg = flamegraph_svg(PY_SPY_STACKS, "sut-a step 3")
    root = ET.fromstring(svg)
    heading = root.findall(f"{SVG}text")
    assert [t.text for t in heading] == ["sut-a step 3", "162 samples"]
    lowest_heading = max(float(t.attrib["y"]) for t in heading)
    assert all(float(r.attrib["y"]) > lowest_heading for r in root.iter(f"{SVG}rect"))


def test_frame_names_and_the_title_are_escaped():
    svg = flamegraph_svg({("<module> (app.py:6)", "a&b"): 1}, "<x> & y")
    assert "<module>" not in svg and "&lt;module&gt; (app.py:6)" in svg
    assert "a&amp;b" in svg and "&lt;x&gt; &amp; y" in svg
    assert "<module> (app.py:6)" in frames(svg)
    assert frames(svg)["<module> (app.py:6)"]["label"] == "<module> (app.py:6)"


def test_the_same_stacks_give_the_same_svg_whatever_their_order():
    backwards = dict(reversed(list(PY_SPY_STACKS.items())))
    first = flamegraph_svg(PY_SPY_STACKS, "t")
    assert flamegraph_svg(PY_SPY_STACKS, "t") == first
    assert flamegraph_svg(backwards, "t") == first
    assert flamegraph_svg(parse_collapsed(PY_SPY), "t") == first


def test_colours_are_warm_and_follow_the_function_name():
    found = frames(flamegraph_svg({("a (x.py:1)", f"f{i}"): 1 for i in range(50)}, "t"))
    for frame in found.values():
        red, green, blue = map(
            int, re.fullmatch(r"rgb\((\d+),(\d+),(\d+)\)", frame["fill"]).groups()
        )
        assert 205 <= red <= 255 and 0 <= green <= 230 and 0 <= blue <= 55
    assert len({f["fill"] for f in found.values()}) > 10  # names tell frames apart
    # one function, two lines: one colour; and the colour is the same in every process
    # (a hash of the name's bytes, not Python's salted hash(): this value is pinned)
    work = frames(flamegraph_svg(PY_SPY_STACKS, "t"))
    assert work["work (app.py:4)"]["fill"] == work["work (app.py:5)"]["fill"]
    assert work["work (app.py:4)"]["fill"] == "rgb(252,204,25)"


@pytest.mark.parametrize(
    ("share", "label"),
    [
        (1.0, "a_rather_long_function_name (some/module.py:123)"),  # fits whole
        (0.1, "a_rather_long.."),  # 118 px: (118 - 6) / 7.08 = 15 characters, ".." included
        (0.02, ""),  # 23.6 px: 2 characters do not make a label
    ],
)
def test_labels_are_clipped_to_their_frame(share, label):
    name = "a_rather_long_function_name (some/module.py:123)"
    total = 1000
    part = round(total * share)
    stacks = {("main", name): part, ("main",): total - part}
    found = frames(flamegraph_svg(stacks, "t"))
    assert found[name]["label"] == label
    width = float(found[name]["width"])
    assert len(found[name]["label"]) * 0.59 * 12 <= width - 6


def test_frames_narrower_than_a_tenth_of_a_pixel_are_left_out():
    # 1180 px for 100,001 samples: one sample is 0.0118 px, and so are its children
    stacks = {("main",): 100_000, ("main", "tiny"): 1, ("main", "tiny", "tinier"): 0}
    found = frames(flamegraph_svg(stacks, "t"))
    assert set(found) == {"all", "main"}
    assert set(frames(flamegraph_svg({("main",): 10, ("main", "tiny"): 1}, "t"))) == {
        "all",
        "main",
        "tiny",
    }


@pytest.mark.parametrize("stacks", [{}, {("main",): 0}, {("a",): 0, ("a", "b"): 0}])
def test_no_samples_give_a_valid_svg_that_says_so(stacks):
    svg = flamegraph_svg(stacks, "empty step")
    assert frames(svg) == {}
    assert texts(svg) == ["empty step", "no samples"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: flamegraph_svg({("a",): -1}, "t"), "negative count"),
        (lambda: speedscope_json({("a",): 2, ("a", "b"): -1}, "t"), "negative count"),
        (lambda: flamegraph_svg({("a",): 1}, "t", width_px=20), "no room"),
    ],
)
def test_impossible_input_is_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- speedscope ----------------------------------------------------------------------------


def frame_text(frame: dict) -> str:
    """A speedscope frame back to py-spy's text (the module's documented rule)."""
    if "file" in frame:
        return f"{frame['name']} ({frame['file']}:{frame['line']})"
    return frame["name"]


def stacks_of(document: dict) -> dict[tuple[str, ...], int]:
    shared = document["shared"]["frames"]
    (profile,) = document["profiles"]
    rebuilt: dict[tuple[str, ...], int] = {}
    for sample, weight in zip(profile["samples"], profile["weights"], strict=True):
        stack = tuple(frame_text(shared[i]) for i in sample)
        rebuilt[stack] = rebuilt.get(stack, 0) + weight
    return rebuilt


SPEEDSCOPE_CASES = [
    {},
    {("main",): 0},
    PY_SPY_STACKS,
    {("a", "b", "a"): 2, ("a", "b"): 3, ("b",): 1, ("a",): 4},  # recursion, shared frames
    {("<module> (app.py:6)", "f (x) (a.py:3)", "g (a.py)", "h (a.py:0)"): 5},
    {("thread (1)", "w (w.py:1)"): 7, ("thread (2)", "w (w.py:1)"): 9},
    {(): 4, ("a",): 1},  # samples with no frame at all
]


@pytest.mark.parametrize("stacks", SPEEDSCOPE_CASES)
def test_speedscope_round_trips_the_stacks(stacks):
    document = json.loads(json.dumps(speedscope_json(stacks, "step 1")))  # plain JSON
    assert stacks_of(document) == stacks


@pytest.mark.parametrize("stacks", SPEEDSCOPE_CASES)
def test_speedscope_frames_are_listed_once_and_weights_sum_to_the_total(stacks):
    document = speedscope_json(stacks, "step 1")
    shared = document["shared"]["frames"]
    texts_ = [frame_text(dict(frame)) for frame in shared]
    assert len(texts_) == len(set(texts_)) == len({f for stack in stacks for f in stack})
    (profile,) = document["profiles"]
    assert all(0 <= i < len(shared) for sample in profile["samples"] for i in sample)
    assert sum(profile["weights"]) == total_samples(stacks) == profile["endValue"]
    assert len(profile["samples"]) == len(profile["weights"]) == len(stacks)


def test_speedscope_file_shape():
    document = speedscope_json(parse_collapsed(PY_SPY), "sut-a step 2")
    assert document == {
        "$schema": SPEEDSCOPE_SCHEMA,
        "shared": {
            "frames": [
                {"name": "thread (28912)"},
                {"name": "<module>", "file": "app.py", "line": 11},
                {"name": "main", "file": "app.py", "line": 10},
                {"name": "work", "file": "app.py", "line": 4},
                {"name": "work", "file": "app.py", "line": 5},
            ]
        },
        "profiles": [
            {
                "type": "sampled",
                "name": "sut-a step 2",
                "unit": "none",
                "startValue": 0,
                "endValue": 162,
                "samples": [[0, 1, 2], [0, 1, 2, 3], [0, 1, 2, 4]],
                "weights": [1, 38, 123],
            }
        ],
        "name": "sut-a step 2",
        "activeProfileIndex": 0,
        "exporter": "evbench",
    }
    assert speedscope_json(dict(reversed(PY_SPY_STACKS.items())), "sut-a step 2") == document


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        ("work (app.py:10)", {"name": "work", "file": "app.py", "line": 10}),
        (
            "<module> (/srv/a b/app.py:1)",
            {"name": "<module>", "file": "/srv/a b/app.py", "line": 1},
        ),
        ("f (x) (a.py:3)", {"name": "f (x)", "file": "a.py", "line": 3}),
        ("thread (28912)", {"name": "thread (28912)"}),
        ("g (a.py)", {"name": "g (a.py)"}),  # no line: the text is the name
        ("h (a.py:03)", {"name": "h (a.py:03)"}),  # would not read back as it was written
        (" (a.py:3)", {"name": " (a.py:3)"}),  # no function name
        ("plain", {"name": "plain"}),
    ],
)
def test_speedscope_frames_carry_file_and_line_when_the_text_has_them(frame, expected):
    assert speedscope_json({(frame,): 1}, "p")["shared"]["frames"] == [expected]
