"""The search's last words (pure): its answer, and what it means when probes had faults."""

from __future__ import annotations

import pytest

from evbench.searchdoc import result_line
from evbench.searchplan import Result


@pytest.mark.parametrize(
    ("faulted", "says"),
    [
        (False, "max sustainable rate 800/s (held 800/s, broke 1000/s) after 5 probes in 1.5 min"),
        (True, "highest rate recovered from its faults at 800/s (held 800/s, broke 1000/s)"),
    ],
)
def test_the_answer_says_what_was_found(faulted, says):
    result = Result(800, 800, 1000, "800/s held for the 120 s confirmation", probes=5)
    assert result_line(result, 1.5, faulted).startswith(says)


def test_a_search_without_an_answer_says_why():
    result = Result(None, None, 200, "gave up after 1 probes without a confirmed rate", probes=1)
    assert result_line(result, 0.2, True) == (
        "search ended after 1 probes in 0.2 min: gave up after 1 probes without a confirmed rate"
    )
