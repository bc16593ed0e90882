"""--kafka-config's files (pure): a properties file or a JSON object read into KEY=VALUE items
when the flags are parsed, and each way such a file can be wrong said in one line naming it."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from loadgen.kafkaconfig import config_settings, kafka_config_arg
from loadgen.settings import SenderSettings, add_sender_arguments, settings_from_args

_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'
)


@pytest.mark.parametrize(
    ("text", "json_named", "settings"),
    [
        ("linger.ms=0\nacks=all\n", False, [("linger.ms", "0"), ("acks", "all")]),
        # Kafka's client.properties: comments, blanks, `:` separators, a continued line
        (
            "# SASL\n! old-style comment\n\nsecurity.protocol : SASL_SSL\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \\\n"
            '    required username="u" password="p";\nbootstrap.servers=a:9092,b:9092\n',
            False,
            [
                ("security.protocol", "SASL_SSL"),
                ("sasl.jaas.config", _JAAS),
                ("bootstrap.servers", "a:9092,b:9092"),
            ],
        ),
        ("\ufeffacks=1\r\n", False, [("acks", "1")]),  # a BOM, Windows line ends
        ("empty.value=\n", False, [("empty.value", "")]),
        (
            '{"linger.ms": 5, "acks": "all", "enable.idempotence": true, "x": 0.5}',
            False,
            [("linger.ms", "5"), ("acks", "all"), ("enable.idempotence", "true"), ("x", "0.5")],
        ),
        ('{"acks": "1"}', True, [("acks", "1")]),
    ],
    ids=["lines", "client.properties", "bom crlf", "empty value", "json", "json named"],
)
def test_a_files_settings_in_its_order(text, json_named, settings):
    assert config_settings(text.encode(), json_named) == settings


@pytest.mark.parametrize(
    ("raw", "json_named", "said"),
    [
        (b"linger.ms=0\nlinger.ms\n", False, "line 2: 'linger.ms' is not KEY=VALUE"),
        (b"acks 1\n", False, "line 1: 'acks 1' is not KEY=VALUE"),
        (b"=5\n", False, "line 1: '=5' has no key"),
        (b"# only a comment\n\n", False, "holds no settings"),
        (b"", False, "holds no settings"),
        (b"{}", False, "holds no settings"),
        (b"\xff\xfe\x00a", False, "not text (no UTF-8 at byte 0)"),
        (b'{"acks": 1,}', False, "not JSON: Expecting property name enclosed in double quotes at "),
        (b"acks: 1\n", True, "not JSON: Expecting value at line 1 column 1"),
        (b'["acks=1"]', False, "a JSON array is no shape of settings: give an object of them"),
        (b'{"acks": {"v": 1}}', False, '"acks" is a JSON object: a setting is a string, a num'),
        (b'{"acks": null}', False, '"acks" is a JSON null: a setting is a string'),
        (b'{" ": "1"}', False, "a setting with an empty name"),
    ],
    ids=[
        "bare key",
        "space separated",
        "no key",
        "comments only",
        "empty",
        "empty object",
        "binary",
        "json trailing comma",
        "named json, not json",
        "json array",
        "json nested",
        "json null",
        "json empty name",
    ],
)
def test_a_bad_file_is_refused_saying_what_is_wrong(raw, json_named, said):
    with pytest.raises(ValueError) as refused:
        config_settings(raw, json_named)
    assert said in str(refused.value), refused.value


def test_the_flag_reads_a_file_into_items_and_names_a_file_it_cannot_use(tmp_path: Path):
    (tmp_path / "client.properties").write_text("acks=1\nlinger.ms = 0\n")
    (tmp_path / "bad.json").write_text('{"acks": [1]}')
    assert kafka_config_arg(str(tmp_path / "client.properties")) == ["acks=1", "linger.ms=0"]
    assert kafka_config_arg(" linger.ms = 5 ") == ["linger.ms=5"]
    for given, said in [
        ("client.conf", "client.conf: no such file: give a properties file of KEY=VALUE lines"),
        (str(tmp_path), f"{tmp_path} is a directory: give a properties file"),
        (str(tmp_path / "bad.json"), f'{tmp_path}/bad.json: "acks" is a JSON array'),
        ("=x", "'=x' must be KEY=VALUE (or a file of them)"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError) as refused:
            kafka_config_arg(given)
        assert str(refused.value).startswith(said), refused.value


def test_a_file_it_cannot_read_is_named_with_why(tmp_path: Path):
    (tmp_path / "a-file").write_text("acks=1\n")
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        kafka_config_arg(str(tmp_path / "a-file" / "client.properties"))
    assert str(refused.value) == (
        f"{tmp_path}/a-file/client.properties: cannot read it: Not a directory"
    )


def test_a_files_settings_travel_as_items_to_a_fleets_workers(tmp_path: Path):
    (tmp_path / "p.json").write_text('{"acks": "1", "linger.ms": 0}')
    parser = argparse.ArgumentParser()
    add_sender_arguments(parser)
    argv = ["--target", "kafka://k:9092/t", "--pace", "1:1", "--out", "o"]
    args = parser.parse_args(
        [*argv, "--kafka-config", str(tmp_path / "p.json"), "--kafka-config", "client.id=me"]
    )
    settings = settings_from_args(args)
    assert settings.kafka_config == ("acks=1", "linger.ms=0", "client.id=me")
    # What a master hands its workers: the items, not a path their hosts may not have.
    assert settings_from_args(parser.parse_args(settings.argv())) == settings
    assert str(tmp_path) not in " ".join(settings.argv())
    assert SenderSettings("kafka://k:9092/t", "1:1", Path("o")).kafka_config == ()
