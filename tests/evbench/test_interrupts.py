"""Ctrl-C before the sender starts: raised where Python swallows it (a fork hook, a finalizer),
it still ends the start-up, and is not printed as a traceback (CI caught one swallowed by
logging's fork hook while a child started: the run went on to send its whole pace)."""

import os
import signal
import sys

import pytest

from evbench.interrupts import Interrupts


class _Swallows:
    """A finalizer that takes a real SIGINT: the handler's KeyboardInterrupt is raised inside
    __del__, where Python can only report it as unraisable, as in a fork hook."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs between bytecodes, in here
            pass


class _Sender:
    def __init__(self) -> None:
        self.signals: list[int] = []

    def signal(self, signum: int) -> None:
        self.signals.append(signum)


def test_a_swallowed_interrupt_unwinds_the_start_up_at_the_next_checkpoint(capsys):
    echoed: list[str] = []
    with Interrupts(echoed.append) as interrupts:
        interrupts.checkpoint()  # nothing yet
        _Swallows()  # made and dropped: its finalizer runs here
        assert interrupts.count == 1
        with pytest.raises(KeyboardInterrupt):
            interrupts.checkpoint()
    assert "Traceback" not in capsys.readouterr().err


def test_a_sender_started_after_a_swallowed_interrupt_unwinds_the_start_up(capsys):
    # A sender just started is still importing: a SIGINT would kill it and the run would read
    # as its failure, so the start-up unwinds instead (the session's teardown stops it).
    sender = _Sender()
    with Interrupts(lambda _: None) as interrupts:
        _Swallows()
        with pytest.raises(KeyboardInterrupt):
            interrupts.attach(sender)  # type: ignore[arg-type]
    assert sender.signals == []
    assert "Traceback" not in capsys.readouterr().err


def test_interrupts_while_the_sender_runs_are_forwarded_to_it():
    echoed: list[str] = []
    sender = _Sender()
    with Interrupts(echoed.append) as interrupts:
        interrupts.attach(sender)  # type: ignore[arg-type]
        for _ in range(2):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs between bytecodes, in here
                pass
    assert sender.signals == [signal.SIGINT, signal.SIGINT]
    assert echoed == [
        "interrupted: stopping the sender; every record written so far is kept",
        "interrupted again: not waiting for in-flight answers",
    ]


def test_other_unraisable_errors_still_reach_the_previous_hook():
    seen: list[type] = []

    class _Fails:
        def __del__(self) -> None:
            raise ValueError("a finalizer's own error")

    previous = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: seen.append(type(unraisable.exc_value))
    try:
        with Interrupts(lambda _: None):
            _Fails()
    finally:
        sys.unraisablehook = previous
    assert seen == [ValueError]


def test_an_interrupt_without_a_sender_attached_still_raises_directly():
    with Interrupts(lambda _: None), pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            pass
