"""`evbench run` flags that shape the system under test; all of them land in run.json. The table
is suts.flags.LAB_FLAGS (the lab components take the same flags)."""

from __future__ import annotations

import argparse
import socket
from dataclasses import replace
from typing import Any

from contract.errors import EvbenchError
from runtime.argtypes import http_url, port_number
from runtime.parquet import record_roll_s
from suts.flags import EACH, EXTEND, FLAG_ALIASES, LAB_FLAGS, REPLACE
from suts.lab import LOCAL_SUTS, SUTS, LabSettings, driver_for, sut_help

SUT_HELP = sut_help()


def sut_list(text: str) -> tuple[str, ...]:
    """`--sut a,b`: names the registry knows, in the order given."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"unknown system '{text}': choose from {', '.join(SUTS)}")
    for name in names:
        try:
            driver_for(name)
        except EvbenchError as exc:
            raise argparse.ArgumentTypeError(str(exc).replace("SUT", "system", 1)) from None
    if twice := sorted({name for name in names if names.count(name) > 1}):
        # Both would write the same <run>/<sut>/ directory: the second would fail after the
        # first had run.
        raise argparse.ArgumentTypeError(f"{', '.join(twice)} named more than once")
    return names


def _dest(name: str) -> str:
    return f"lab__{name}"


def _shown(value: object) -> str:
    if isinstance(value, tuple):
        return " ".join(value) if value else "none"
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def add_lab_arguments(run: argparse.ArgumentParser, only: tuple[str, ...] | None = None) -> None:
    """The system's flags and the receiver's address; `only` (LabSettings fields) for a command
    that drives no lab system of its own (`evbench memory`: --kafka-bootstrap, --replication)."""
    if only is None:
        _add_sut_argument(run)
    lab = run.add_argument_group("system under test")
    lab.add_argument(
        "--receiver-host", default="127.0.0.1", help="receiver bind address (default 127.0.0.1)"
    )
    lab.add_argument(
        "--receiver-port", type=port_number, default=0, help="receiver port (default 0: a free one)"
    )
    lab.add_argument(
        "--receiver-url",
        type=http_url,
        default=None,
        metavar="URL",
        help="the receiver as the system reaches it, when that is not http://HOST:PORT/ (a "
        "--receiver-host of 0.0.0.0, a Service, a NAT): the subscriber URL the system is given "
        "and run.json records",
    )
    defaults = LabSettings()
    for name, flag, kwargs, combine in LAB_FLAGS:
        if only is not None and name not in only:
            continue
        default = getattr(defaults, name)
        help_text = kwargs["help"] + ("" if default is None else f" (default {_shown(default)})")
        metavar = kwargs.get("metavar", flag.removeprefix("--").upper().replace("-", "_"))
        lab.add_argument(
            flag,
            *FLAG_ALIASES.get(name, ()),
            **{**kwargs, "help": help_text, "metavar": metavar},
            dest=_dest(name),
            default=None if kwargs.get("action") == "append" or combine == EACH else default,
        )


def _add_sut_argument(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--sut",
        default=None,
        type=sut_list,
        metavar="SUT[,SUT...]",
        help=f"systems under test, in turn: {', '.join(SUTS)} "
        f"(default: all of {', '.join(LOCAL_SUTS)})",
    )


def lab_settings(args: argparse.Namespace) -> LabSettings:
    """The LabSettings the flags ask for: repeated flags replace or extend the defaults."""
    defaults = LabSettings()
    values: dict[str, Any] = {}  # each field's value, typed by LabSettings itself
    for name, _, _, combine in LAB_FLAGS:
        if not hasattr(args, _dest(name)):
            continue  # a flag the command does not take: the default
        given = getattr(args, _dest(name))
        if combine == REPLACE:
            values[name] = tuple(given) if given else getattr(defaults, name)
        elif combine == EXTEND:
            values[name] = (*getattr(defaults, name), *(given or ()))
        elif combine == EACH:  # the first; a campaign gives each item its own (replace)
            values[name] = given[0] if given else getattr(defaults, name)
        else:
            values[name] = given
    return LabSettings(**values)


def fanout_values(args: argparse.Namespace) -> tuple[int, ...]:
    """--subscribers' values, in the user's order: the fan-outs a campaign runs in turn (one,
    LabSettings' own, when the flag is not given or the command has none)."""
    given = getattr(args, _dest("fanout"), None)
    return tuple(given) if given else (LabSettings().fanout,)


def check_system(args: argparse.Namespace, lab: LabSettings) -> None:
    """What a system needs that no single flag's type can check, before anything is made: a
    run directory taken by a run that could never start would take its run id."""
    if "external" in (getattr(args, "sut", None) or ()) and not (
        lab.ingress or (lab.kafka_bootstrap and lab.topic)
    ):
        raise EvbenchError(
            "--sut external needs --ingress URL, or --kafka-bootstrap HOST:PORT with --topic"
        )
    suts = (args.sut or LOCAL_SUTS) if hasattr(args, "sut") else ()  # memory: none of them
    fanouts = fanout_values(args)
    if "external" in suts and len(fanouts) > 1:
        raise EvbenchError(
            f"--sut external with --subscribers {','.join(map(str, fanouts))}: your system is "
            "set up for one N at a time; run each N on its own (--subscribers N), pointing its "
            "subscriptions at the URLs the run prints"
        )
    for name in suts:
        for fanout in fanouts:  # every item of the campaign, before the first
            if problem := driver_for(name).settings_problem(replace(lab, fanout=fanout)):
                raise EvbenchError(problem)
    for flag, settings in (("--producer", lab.producer), ("--consumer", lab.consumer)):
        if problem := librdkafka_problem(flag, settings):
            raise EvbenchError(problem)
    check_receiver_address(args.receiver_host, args.receiver_port)
    record_roll_s()  # the instruments read it as they start: a bad value is named here, first


def librdkafka_problem(flag: str, settings: tuple[str, ...]) -> str | None:
    """Why librdkafka refuses these KEY=VALUE settings (None: it takes them), found by making
    a client of them, which connects to nothing: the lab's processes would otherwise fail on
    them after the run had started, with their traceback as the run's error."""
    from confluent_kafka import Consumer, KafkaException, Producer

    config = {"log_level": "0"}  # nothing to connect to is no warning here
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            return f"{flag} '{item}' must be KEY=VALUE"
        config[key.strip()] = value.strip()
    try:
        if flag == "--producer":
            Producer(config)
        else:
            Consumer({"group.id": "evbench-check", **config}).close()
    except KafkaException as exc:
        return f"{flag}: librdkafka refuses the settings: {exc.args[0].str()}"
    return None


def check_receiver_address(host: str, port: int) -> None:
    """The receiver can listen on --receiver-host/--receiver-port: bound here for a moment,
    as the receiver binds (SO_REUSEADDR), so that a wrong address is named before anything
    starts."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise EvbenchError(f"--receiver-host {host!r} is no address: {exc}") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            # Said as evbench.session says a receiver that could not listen.
            why = (exc.strerror or str(exc)).lower()
            raise EvbenchError(
                f"the receiver could not listen on {host}:{port or 'a free port'} ({why}): is "
                "--receiver-host an address of this host, and --receiver-port free?"
            ) from None
