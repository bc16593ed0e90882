"""`--kafka-config`: the producer's settings for kafka:// targets, each given as KEY=VALUE or as a
file of them, as Kafka's own tools take one (`--producer.config client.properties`): a properties
file (KEY=VALUE or KEY: VALUE lines, `#` and `!` comments, a trailing backslash continuing a line)
or a JSON object of settings.

A file is read when the flags are parsed, before anything starts, into KEY=VALUE items: a bad
one is refused in one line naming the file and what is wrong (argparse exits 2), and a fleet's
master passes its workers the items, not a path that may not exist on their hosts. Standard
library only."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

_GIVE = "give a properties file of KEY=VALUE lines or a JSON object of producer settings"


def kafka_config_arg(text: str) -> list[str]:
    """argparse type of --kafka-config: one KEY=VALUE item, or a file's settings as items."""
    path = Path(text)
    if "=" in text and not path.is_file():
        key, _, value = text.partition("=")
        if not key.strip():
            raise argparse.ArgumentTypeError(f"'{text}' must be KEY=VALUE (or a file of them)")
        return [f"{key.strip()}={value.strip()}"]
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise argparse.ArgumentTypeError(f"{text}: no such file: {_GIVE}, or KEY=VALUE") from None
    except IsADirectoryError:
        raise argparse.ArgumentTypeError(f"{text} is a directory: {_GIVE}") from None
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{text}: cannot read it: {exc.strerror}") from None
    try:
        return [f"{key}={value}" for key, value in config_settings(raw, path.suffix == ".json")]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text}: {exc}") from None


def config_settings(raw: bytes, json_named: bool = False) -> list[tuple[str, str]]:
    """A file's producer settings, in its order: JSON when it is named so or reads as an object
    or array, else a properties file. ValueError says what is wrong, without the file's name.
    Pure."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not text (no UTF-8 at byte {exc.start}): {_GIVE}") from None
    if json_named or text.lstrip().startswith(("{", "[")):
        settings = _json_settings(text)
    else:
        settings = _properties_settings(text)
    if not settings:
        raise ValueError(f"holds no settings: {_GIVE}")
    return settings


def _json_settings(text: str) -> list[tuple[str, str]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(doc, dict):
        raise ValueError(
            f"a JSON {_json_kind(doc)} is no shape of settings: give an object of them, "
            '{"linger.ms": 5, "acks": "all"}'
        )
    settings = []
    for key, value in doc.items():
        if not key.strip():
            raise ValueError("a setting with an empty name")
        if isinstance(value, bool):
            settings.append((key.strip(), "true" if value else "false"))
        elif isinstance(value, str | int | float):
            settings.append((key.strip(), str(value)))
        else:
            raise ValueError(
                f'"{key}" is a JSON {_json_kind(value)}: a setting is a string, a number or '
                "true/false"
            )
    return settings


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "object"
    return "array" if isinstance(value, list) else type(value).__name__


def _properties_settings(text: str) -> list[tuple[str, str]]:
    """KEY=VALUE or KEY: VALUE lines; comments and blank lines skipped; a line ending in an odd
    number of backslashes goes on on the next (a long sasl.jaas.config). Stricter than Java's
    reader, which also takes a bare KEY or KEY VALUE: for a producer's settings those are
    mistakes, said with their line."""
    settings = []
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        start, line = number + 1, lines[number].strip()
        number += 1
        while _continues(line) and number < len(lines):
            line = line[:-1] + lines[number].strip()
            number += 1
        if not line or line.startswith(("#", "!")):
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            raise ValueError(f"line {start}: '{_short(line)}' is not KEY=VALUE")
        key, value = line[:cut].strip(), line[cut + 1 :].strip()
        if not key:
            raise ValueError(f"line {start}: '{_short(line)}' has no key")
        settings.append((key, value))
    return settings


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _short(line: str) -> str:
    return line if len(line) <= 60 else line[:57] + "..."
