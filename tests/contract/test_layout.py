"""User strings that become path components: one rule, checked before anything is written."""

import pytest

from contract.errors import EvbenchError
from contract.layout import MAX_COMPONENT_CHARS, safe_component
from contract.records import SENT_FIELDS
from runtime.parquet import PartWriter
from runtime.runs import new_sut_dir

RULE = f"1 to {MAX_COMPONENT_CHARS} characters"


@pytest.mark.parametrize(
    "value",
    ["run-1", "1k-2k", "channel-imc", "x", "9", "A.b_c-9", "a..b", "a" * MAX_COMPONENT_CHARS],
)
def test_safe_names_pass_unchanged(value):
    assert safe_component("SUT name", value) == value


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("", "''"),
        (".", "'.'"),
        ("..", "'..'"),
        ("../../x", "'../../x'"),
        ("/tmp/x", "'/tmp/x'"),
        ("a/b", "'a/b'"),
        ("a\\b", "'a\\\\b'"),
        (".hidden", "'.hidden'"),
        ("-rf", "'-rf'"),  # read as an option by the next tool that sees it
        ("_x", "'_x'"),
        ("a b", "'a b'"),
        ("x\n", "'x\\n'"),  # a trailing newline must not slip past the pattern's end
        ("nul\x00", "'nul\\x00'"),
        ("<script>", "'<script>'"),
        ("x\"'y", "'x\"\\'y'"),
        ("café", "'café'"),  # non-ASCII: the same name can be spelt in several byte forms
        ("a" * (MAX_COMPONENT_CHARS + 1), f"({MAX_COMPONENT_CHARS + 1} characters)"),
        ("r" * 300, "(300 characters)"),
    ],
)
def test_unsafe_names_are_refused_naming_kind_value_and_rule(value, shown):
    with pytest.raises(EvbenchError) as caught:
        safe_component("SUT name", value)
    message = str(caught.value)
    assert message.startswith("SUT name ") and shown in message and RULE in message
    assert len(message) < 200  # a 300-character value is shortened, not printed whole


@pytest.mark.parametrize(
    ("run_id", "pace", "sut", "kind"),
    [
        ("../up", "1k-2k", "direct", "run id"),
        ("run-1", "../../p", "direct", "pace name"),
        ("run-1", "1k-2k", "../../x", "SUT name"),
        ("run-1", "1k-2k", "/abs", "SUT name"),
        ("r" * 300, "1k-2k", "direct", "run id"),
    ],
)
def test_new_sut_dir_writes_nothing_for_a_bad_component(tmp_path, run_id, pace, sut, kind):
    runs = tmp_path / "runs"
    with pytest.raises(EvbenchError, match=f"^{kind} "):
        new_sut_dir(runs, run_id, pace, sut)
    assert list(tmp_path.iterdir()) == []


def test_part_file_prefix_cannot_leave_its_directory(tmp_path):
    # `evbench receive --name ../../x` used to write its part files two levels up.
    with pytest.raises(EvbenchError, match=r"^file name prefix '\.\./x'"):
        PartWriter(tmp_path / "out", SENT_FIELDS, prefix="../x")
    assert list(tmp_path.iterdir()) == []
