"""`evbench run` flags that shape the system under test; all of them land in run.json."""

from __future__ import annotations

import argparse
from typing import Any

from contract.argtypes import (
    at_least_one,
    milliseconds,
    non_negative,
    port_number,
    positive_seconds,
)
from contract.errors import EvbenchError
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
    return names


# (LabSettings field, flag, argparse keywords, how repeated values combine with the default):
# the one place a lab flag is spelled; defaults come from LabSettings and are shown in --help.
_REPLACE, _EXTEND = "replace", "extend"
_LAB_FLAGS: tuple[tuple[str, str, dict[str, Any], str | None], ...] = (
    ("ingress", "--ingress", dict(metavar="URL", help="external: where to send"), None),
    (
        "kafka_bootstrap",
        "--kafka-bootstrap",
        dict(metavar="HOST:PORT", help="use this Kafka instead of a fresh local Tansu broker"),
        None,
    ),
    ("topic", "--topic", dict(help="external: produce to this topic"), None),
    (
        "partitions",
        "--partitions",
        dict(type=at_least_one, help="partitions of the Kafka topic"),
        None,
    ),
    ("replication", "--replication", dict(type=at_least_one, help="replication factor"), None),
    (
        "concurrency",
        "--dispatcher-concurrency",
        dict(type=at_least_one, metavar="N", help="deliveries in flight per dispatcher"),
        None,
    ),
    (
        "ingress_concurrency",
        "--ingress-concurrency",
        dict(
            type=at_least_one,
            metavar="N",
            help="broker-imc: requests the broker ingress forwards to the channel at once",
        ),
        None,
    ),
    (
        "retries",
        "--retries",
        dict(type=non_negative, help="delivery retries on 5xx/429/errors"),
        None,
    ),
    (
        "backoff_ms",
        "--retry-backoff-ms",
        dict(type=milliseconds, metavar="MS", help="first retry delay, doubling"),
        None,
    ),
    (
        "delivery_timeout_s",
        "--delivery-timeout",
        dict(type=positive_seconds, metavar="S", help="per-delivery timeout of every hop"),
        None,
    ),
    (
        "queue_limit",
        "--queue-limit",
        dict(
            type=at_least_one, metavar="N", help="IMC: queued events before the ingress answers 503"
        ),
        None,
    ),
    (
        "max_pending",
        "--max-pending",
        dict(
            type=at_least_one, metavar="N", help="Kafka dispatcher: records taken but undelivered"
        ),
        None,
    ),
    (
        "commit_interval_s",
        "--commit-interval",
        dict(
            type=positive_seconds,
            metavar="S",
            help="Kafka dispatcher: offsets committed this often",
        ),
        None,
    ),
    (
        "producer",
        "--producer",
        dict(
            action="append",
            metavar="KEY=VALUE",
            help="librdkafka producer setting, repeatable, instead of the defaults",
        ),
        _REPLACE,
    ),
    (
        "consumer",
        "--consumer",
        dict(
            action="append",
            metavar="KEY=VALUE",
            help="librdkafka consumer setting, repeatable, added to the defaults",
        ),
        _EXTEND,
    ),
    (
        "trigger",
        "--trigger",
        dict(
            action="append", metavar="ATTR=VALUE[,...]", help="broker trigger filter, any of these"
        ),
        _REPLACE,
    ),
    (
        "ready_timeout_s",
        "--ready-timeout",
        dict(
            type=positive_seconds,
            metavar="S",
            help="wait this long for the SUT (e.g. partition assignment)",
        ),
        None,
    ),
)


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
    defaults = LabSettings()
    for name, flag, kwargs, _ in _LAB_FLAGS:
        if only is not None and name not in only:
            continue
        default = getattr(defaults, name)
        help_text = kwargs["help"] + ("" if default is None else f" (default {_shown(default)})")
        metavar = kwargs.get("metavar", flag.removeprefix("--").upper().replace("-", "_"))
        lab.add_argument(
            flag,
            **{**kwargs, "help": help_text, "metavar": metavar},
            dest=_dest(name),
            default=None if kwargs.get("action") == "append" else default,
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
    values = {}
    for name, _, _, combine in _LAB_FLAGS:
        if not hasattr(args, _dest(name)):
            continue  # a flag the command does not take: the default
        given = getattr(args, _dest(name))
        if combine == _REPLACE:
            values[name] = tuple(given) if given else getattr(defaults, name)
        elif combine == _EXTEND:
            values[name] = (*getattr(defaults, name), *(given or ()))
        else:
            values[name] = given
    return LabSettings(**values)
