"""--fault and --fault-exec read and checked before anything starts (pure)."""

import pytest

from evbench.cli import main
from evbench.faultspec import Fault, check_faults, parse_fault, parse_fault_exec, per_step
from loadgen.pace import Step
from suts.lab import LabSettings, driver_for


@pytest.mark.parametrize(
    ("text", "step", "offset_s", "action", "target", "duration_s"),
    [
        ("2@5s:kill:dispatcher:1s", 2, 5.0, "kill", "dispatcher", 1.0),
        ("2@5:kill:dispatcher", 2, 5.0, "kill", "dispatcher", 0.0),  # back at once
        ("every@500ms:pause:broker:1.5s", None, 0.5, "pause", "broker", 1.5),
        ("1@0s:restart:ingress", 1, 0.0, "restart", "ingress", None),
        (" 3 @ 2.5s : kill : channel : 250ms ", 3, 2.5, "kill", "channel", 0.25),
    ],
)
def test_a_fault_is_read(text, step, offset_s, action, target, duration_s):
    fault = parse_fault(text)
    assert (fault.step, fault.offset_s, fault.action, fault.target, fault.duration_s) == (
        step, offset_s, action, target, duration_s,
    )  # fmt: skip
    assert fault.spec == text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("5s:kill:dispatcher", "no STEP@OFFSET"),
        ("0@5s:kill:dispatcher", "step '0' is not a step number"),
        ("two@5s:kill:dispatcher", "step 'two' is not a step number"),
        ("2@5m:kill:dispatcher", "offset '5m' is not a time"),
        ("2@-1s:kill:dispatcher", "offset '-1s' is not a time"),
        ("2@5s:crash:dispatcher", "action 'crash' is not one of kill, pause, restart"),
        ("2@5s:kill", "no TARGET"),
        ("2@5s:pause:dispatcher", "pause needs a DURATION"),
        ("2@5s:restart:dispatcher:1s", "restart takes no DURATION"),
        ("2@5s:kill:dispatcher:soon", "duration 'soon' is not a time"),
    ],
)
def test_a_bad_fault_names_what_is_wrong(text, says):
    with pytest.raises(ValueError, match=f"fault '{text}'.*{says}"):
        parse_fault(text)


def test_a_command_keeps_its_colons_and_spaces():
    fault = parse_fault_exec("2@5s:kubectl -n x delete pod -l app=a:b")
    assert (fault.step, fault.offset_s, fault.action) == (2, 5.0, "exec")
    assert fault.target == "kubectl -n x delete pod -l app=a:b" and fault.duration_s is None
    with pytest.raises(ValueError, match="no COMMAND"):
        parse_fault_exec("2@5s:  ")


PACE = (Step(100, 10), Step(200, 4))
IMC = driver_for("channel-imc").fault_targets(LabSettings())
KAFKA = driver_for("channel-kafka").fault_targets(LabSettings())


@pytest.mark.parametrize(
    ("spec", "targets", "system", "says"),
    [
        ("1@9s:kill:dispatcher", IMC, "channel-imc", None),  # an alias of the channel
        ("2@2.9s:pause:channel:1s", IMC, "channel-imc", None),
        # a fault outlasting its step would be read as the next step's capacity
        ("2@3.5s:pause:channel:1s", IMC, "channel-imc",
         "end inside its step of 4 s.*ends at 4.5"),
        ("every@3s:kill:dispatcher", KAFKA, "channel-kafka", None),
        ("every@5s:kill:dispatcher", KAFKA, "channel-kafka",
         "inside its step of 4 s \\(here it begins at 5 s"),
        ("3@1s:kill:dispatcher", IMC, "channel-imc", "the pace has 2 step"),
        ("1@10s:kill:dispatcher", IMC, "channel-imc", "inside its step of 10 s"),
        ("1@1s:kill:ingress", IMC, "channel-imc", "has no 'ingress': choose from channel, "
         "dispatcher"),
        ("1@1s:pause:broker:1s", KAFKA, "channel-kafka", None),
        ("1@1s:kill:broker", KAFKA, "channel-kafka", "kafka can only be faulted with pause"),
        ("1@1s:kill:channel", {}, "direct", "no processes of the lab's.*--fault-exec"),
    ],
)  # fmt: skip
def test_faults_are_checked_against_the_pace_and_the_system(spec, targets, system, says):
    faults = [parse_fault(spec)]
    if says is None:
        check_faults(faults, PACE, targets, system)
    else:
        with pytest.raises(ValueError, match=says):
            check_faults(faults, PACE, targets, system)


@pytest.mark.parametrize(
    ("specs", "overlap"),
    [
        (["1@1s:pause:channel:5s", "1@2s:kill:dispatcher"], True),  # an alias: one process
        (["1@1s:pause:channel:1s", "1@2.5s:kill:dispatcher"], False),  # one after the other
        (["every@1s:kill:channel:2s", "2@2s:pause:channel:1s"], True),  # every: in step 2 too
        (["1@1s:kill:channel:2s", "2@2s:pause:channel:1s"], False),  # other steps
        (["1@1s:restart:channel", "1@1.5s:kill:channel"], True),  # a restart holds it a second
    ],
)
def test_two_faults_may_not_hold_one_process_at_once(specs, overlap):
    faults = [parse_fault(spec) for spec in specs]
    if overlap:
        with pytest.raises(ValueError, match="hold the same process at once"):
            check_faults(faults, PACE, IMC, "channel-imc")
    else:
        check_faults(faults, PACE, IMC, "channel-imc")


def test_a_time_past_a_day_is_a_typo():
    with pytest.raises(ValueError, match="duration '10000000000s' is over a day"):
        parse_fault("1@1s:pause:channel:10000000000s")


def test_a_command_is_checked_against_the_pace_only():
    check_faults([parse_fault_exec("2@1s:true")], PACE, {}, "external")
    with pytest.raises(ValueError, match="the pace has 2 step"):
        check_faults([parse_fault_exec("3@1s:true")], PACE, {}, "external")


def test_a_broker_of_the_users_is_not_the_labs_to_fault():
    given = driver_for("channel-kafka").fault_targets(LabSettings(kafka_bootstrap="k:9092"))
    assert "broker" not in given and set(given) == {"dispatcher", "ingress"}


def test_every_is_one_fault_per_step():
    faults = [parse_fault("every@1s:kill:channel"), parse_fault("2@1s:pause:channel:1s")]
    got = per_step(faults, [1, 2, 3])
    assert [(f.step, f.action) for f in got] == [(1, "kill"), (2, "kill"), (3, "kill"),
                                                 (2, "pause")]  # fmt: skip
    assert all(isinstance(f, Fault) and f.spec for f in got)
    # a search's probe 3 (a sender of its own): `every`'s, and none of probe 2's
    assert [(f.step, f.action) for f in per_step(faults, [3])] == [(3, "kill")]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["run", "--pace", "100:5", "--fault", "2@1s:kill:dispatcher"],
         "fault '2@1s:kill:dispatcher': the pace has 1"),
        (["run", "--pace", "100:5", "--fault", "1@1s:kill:nobody"], "channel-imc has no 'nobody'"),
        # a search's faults fit in its shortest probe (--hold); STEP counts probes
        (["search", "--hold", "5", "--fault", "every@4s:pause:channel:2s"],
         "must begin and end inside its step of 5 s"),
        (["search", "--fault-exec", "7@1s:true", "--fault", "3@1s:kill:nobody"],
         "channel-imc has no 'nobody'"),
    ],
)  # fmt: skip
def test_the_command_refuses_a_bad_fault_before_anything_starts(argv, says, tmp_path, capsys):
    code = main([*argv, "--sut", "channel-imc", "--runs-dir", str(tmp_path), "--no-analyze"])
    assert code == 2 and says in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing made


def test_an_unreadable_fault_is_argparses_one_line(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["run", "--fault", "2@5s:crash:dispatcher"])
    assert exited.value.code == 2
    assert "action 'crash' is not one of" in capsys.readouterr().err


def test_a_target_not_back_from_its_fault_is_named():
    from evbench.faults import FaultInjector

    injector = FaultInjector([], lambda line: None)
    done = {"action": "kill", "target": "dispatcher", "at_ns": 1, "back_ns": 2, "error": None}
    injector.docs = [
        done,
        {**done, "target": "channel", "back_ns": None},  # given up: the run ended first
        {**done, "target": "filter", "error": "EvbenchError: did not start"},
        {**done, "target": "ingress", "at_ns": None, "back_ns": None},  # never done
        {**done, "action": "exec", "target": "kubectl ...", "back_ns": None},  # the user's
    ]
    assert injector.not_back() == ["channel", "filter (EvbenchError: did not start)"]
