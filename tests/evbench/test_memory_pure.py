"""The memory evaluation's pure pieces: consumer choices, /proc status, the peak table, the
scenario an interrupt cut short."""

import pytest

from analysis.memory import peak_table
from evbench.consumers import LOW_MEMORY, consumer_specs, logged_errors
from evbench.memorydoc import cut_scenario, never_consumed
from evbench.samples import status_fields


def test_consumers_by_name_with_settings_for_the_clients_they_belong_to():
    specs = consumer_specs(
        "confluent,confluent-lowmem,aiokafka",
        ("fetch.queue.backoff.ms=50", "max_partition_fetch_bytes=65536"),
    )
    assert [(s.name, s.client) for s in specs] == [
        ("confluent", "confluent"),
        ("confluent-lowmem", "confluent"),
        ("aiokafka", "aiokafka"),
    ]
    assert dict(specs[1].settings) == {**dict(LOW_MEMORY), "fetch.queue.backoff.ms": "50"}
    assert dict(specs[2].settings) == {"max_partition_fetch_bytes": "65536"}  # aiokafka's own
    # the lab's consumers are librdkafka too: dotted names go to them
    source, kp = consumer_specs(
        "source,kafka-python", ("fetch.max.bytes=1000", "max_poll_records=5")
    )
    assert dict(source.settings) == {"fetch.max.bytes": "1000"}
    assert dict(kp.settings) == {"max_poll_records": "5"}
    # a user's value wins over the named set's
    (lowmem,) = consumer_specs("confluent-lowmem", ("queued.min.messages=1000",))
    assert dict(lowmem.settings)["queued.min.messages"] == "1000"


@pytest.mark.parametrize(
    ("names", "extra", "message"),
    [
        ("confluent,franz", (), "unknown consumer 'franz'"),
        ("confluent,aiokafka,confluent", (), "consumer 'confluent' named twice"),
        ("confluent", ("nokey",), "--consumer 'nokey' must be KEY=VALUE"),
        (" , ", (), "no consumer named"),
    ],
)
def test_bad_consumer_choices_are_refused_by_name(names, extra, message):
    with pytest.raises(ValueError, match=message):
        consumer_specs(names, extra)


def test_proc_status_memory_lines_in_bytes():
    text = (
        "Name:\tpython\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n"
        "RssAnon:\t   51200 kB\nThreads:\t5\n"
    )
    assert status_fields(text) == {
        "VmHWM": 204800 * 1024,
        "VmRSS": 102400 * 1024,
        "RssAnon": 51200 * 1024,
    }


def test_the_peak_table_reads_like_seed_000():
    mib = 2**20
    row = {
        "consumer": "confluent",
        "partitions": 100,
        "figures": {
            "idle_bytes": 20 * mib,
            "peak_bytes": 76 * mib,
            "plateau_bytes": 46 * mib,
            "returned_to_idle": False,
        },
        "predicted_buffer_bytes": 118 * mib,
        "first_message_s": 2.5,
        "never_consumed": [24, 66],
    }
    header, line = peak_table([row])
    assert header.split()[:4] == ["consumer", "P", "idle", "MiB"]
    assert line.split() == [
        "confluent",
        "100",
        "20.0",
        "76.0",
        "46.0",
        "no",
        "118.0",
        "2.5",
        "24,",
        "66",
    ]
    empty = {**row, "figures": None, "first_message_s": None, "never_consumed": []}
    assert peak_table([empty])[1].split() == [
        "confluent",
        "100",
        "-",
        "-",
        "-",
        "-",
        "118.0",
        "-",
        "-",
    ]


LAG = [
    {"partition": 0, "committed": 500, "end": 500, "lag": 0},
    {"partition": 1, "committed": None, "end": 480, "lag": 480},
    {"partition": 2, "committed": 3, "end": 470, "lag": 467},
    {"partition": 3, "committed": None, "end": 0, "lag": 0},  # nothing was ever written to it
]


@pytest.mark.parametrize(
    ("per_partition", "never"),
    [
        ({"0": 500, "2": 3}, [1]),  # it finished: its own counts; the empty one is not starved
        ({"0": 500, "1": 0, "2": 3}, [1]),
        (None, [1]),  # it died: nothing committed for partition 1
    ],
)
def test_partitions_never_consumed(per_partition, never):
    assert never_consumed(per_partition, LAG) == never


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        ("", []),
        ('{"event": "progress", "error": "x"}\n', []),  # its own JSON lines are not errors
        (
            "%2|1795421569.937|THREAD|rdkafka#consumer-1| [thrd:app]: Unable to create broker "
            "thread\n%2|1795421569.937|THREAD|rdkafka#consumer-1| [thrd:app]: Unable to create "
            "broker thread\n%7|1795421569.9|DEBUG|x: chatter\n",
            [
                "%2|1795421569.937|THREAD|rdkafka#consumer-1| [thrd:app]: Unable to create "
                "broker thread"
            ],
        ),
        (
            "%4|1.0|REQTMOUT|c| timed out\nTraceback (most recent call last):\n  File x\n"
            "MemoryError\nunclosed client session\n",
            ["%4|1.0|REQTMOUT|c| timed out", "Traceback (most recent call last):", "MemoryError"],
        ),
    ],
)
def test_what_a_consumer_logged_that_went_wrong(log, expected):
    assert logged_errors(log) == expected


def test_logged_errors_stop_at_the_limit():
    log = "\n".join(f"%3|{i}|ERR|c| error {i}" for i in range(50))
    assert len(logged_errors(log, limit=7)) == 7


def test_a_scenario_cut_short_names_itself_its_time_and_where_its_records_are():
    assert cut_scenario("confluent-p2", 3.64) == {
        "scenario": "confluent-p2",
        "after_s": 3.6,
        "reason": "interrupted after 3.6 s: no scenario.json, not analysed; what it wrote "
        "(samples, logs) is in confluent-p2/",
    }
