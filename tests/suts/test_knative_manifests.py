"""The Kubernetes manifests of suts/knative/: current API versions, required fields, and names,
ports and URLs that agree across files (no cluster needed: what would fail at `kubectl apply`
time, or silently route events nowhere, fails here)."""

from __future__ import annotations

import shlex
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from contract.records import DECOY_EVENT_TYPE, EVENT_TYPE, WARMUP_EVENT_TYPE
from suts.lab import LOCAL_SUTS

DIR = Path(__file__).resolve().parents[2] / "suts" / "knative"
API_VERSIONS = {
    "Namespace": "v1",
    "ConfigMap": "v1",
    "Service": "v1",
    "Deployment": "apps/v1",
    "Job": "batch/v1",
    "InMemoryChannel": "messaging.knative.dev/v1",
    "Subscription": "messaging.knative.dev/v1",
    "KafkaChannel": "messaging.knative.dev/v1beta1",
    "Broker": "eventing.knative.dev/v1",
    "Trigger": "eventing.knative.dev/v1",
    "KafkaSource": "sources.knative.dev/v1beta1",
    "KafkaTopic": "kafka.strimzi.io/v1beta2",
}
BROKER_INGRESS = {
    "broker-ingress.knative-eventing.svc.cluster.local": "MTChannelBasedBroker",
    "kafka-broker-ingress.knative-eventing.svc.cluster.local": "Kafka",
}


def _load() -> list[dict]:
    docs = []
    for path in sorted(DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                docs.append({**doc, "_file": path.name})
    return docs


DOCS = _load()


def _of(kind: str) -> list[dict]:
    return [d for d in DOCS if d["kind"] == kind]


def _named(kind: str, name: str, namespace: str = "evbench") -> dict:
    found = [
        d
        for d in _of(kind)
        if d["metadata"]["name"] == name and d["metadata"].get("namespace") == namespace
    ]
    assert len(found) == 1, f"{kind} {namespace}/{name}: {len(found)} defined"
    return found[0]


def _containers() -> list[tuple[dict, dict]]:
    """(workload, container) for every container of every Deployment and Job."""
    return [
        (w, c)
        for w in _of("Deployment") + _of("Job")
        for c in w["spec"]["template"]["spec"]["containers"]
    ]


def test_every_file_parses_into_objects_of_known_kinds():
    assert {d["_file"] for d in DOCS} == {p.name for p in DIR.glob("*.yaml")}
    assert {d["kind"] for d in DOCS} <= set(API_VERSIONS)


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_current_api_versions_and_required_fields(doc):
    assert doc["apiVersion"] == API_VERSIONS[doc["kind"]]
    assert doc["metadata"]["name"]
    if doc["kind"] != "Namespace":
        assert doc["metadata"]["namespace"] in ("evbench", "kafka")  # the topic lives with Kafka


def test_names_are_unique_per_kind_and_namespace():
    keys = Counter((d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in DOCS)
    assert [k for k, n in keys.items() if n > 1] == []


def _service_refs() -> list[tuple[dict, dict]]:
    refs = []
    for doc in DOCS:
        spec = doc.get("spec") or {}
        for holder in (spec.get("subscriber"), spec.get("sink")):
            if holder and "ref" in holder:
                refs.append((doc, holder["ref"]))
    return refs


def test_every_subscriber_and_sink_is_a_service_defined_here():
    refs = _service_refs()
    assert {d["kind"] for d, _ in refs} == {"Subscription", "Trigger", "KafkaSource"}
    for doc, ref in refs:
        assert (ref["apiVersion"], ref["kind"]) == ("v1", "Service"), doc["metadata"]["name"]
        _named("Service", ref["name"], doc["metadata"]["namespace"])


def test_subscriptions_name_channels_defined_here_by_their_kind():
    for sub in _of("Subscription"):
        channel = sub["spec"]["channel"]
        found = _named(channel["kind"], channel["name"])
        assert found["apiVersion"] == channel["apiVersion"]


def test_brokers_have_a_class_a_config_and_triggers_for_measured_and_warmup_events_only():
    for broker in _of("Broker"):
        assert broker["metadata"]["annotations"]["eventing.knative.dev/broker.class"] in (
            "MTChannelBasedBroker",
            "Kafka",
        )
        _named("ConfigMap", broker["spec"]["config"]["name"])
        types = [
            t["spec"]["filter"]["attributes"]["type"]
            for t in _of("Trigger")
            if t["spec"]["broker"] == broker["metadata"]["name"]
        ]
        assert sorted(types) == sorted([EVENT_TYPE, WARMUP_EVENT_TYPE])
    assert all(
        t["spec"]["filter"]["attributes"]["type"] != DECOY_EVENT_TYPE for t in _of("Trigger")
    )
    for trigger in _of("Trigger"):
        _named("Broker", trigger["spec"]["broker"])


def test_services_reach_a_container_port_of_a_workload_they_select():
    for service in _of("Service"):
        selector = service["spec"]["selector"]
        matched = [
            (w, c)
            for w, c in _containers()
            if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert matched, f"service {service['metadata']['name']} selects no workload"
        names = {p["name"] for _, c in matched for p in c.get("ports", [])}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in names, service["metadata"]["name"]


def _container_port(container: dict, name: str) -> int:
    (port,) = [p["containerPort"] for p in container["ports"] if p["name"] == name]
    return port


def test_the_receiver_listens_where_its_container_port_says():
    (_, receiver) = next((w, c) for w, c in _containers() if c["name"] == "receiver")
    argv = receiver["command"]
    assert argv[:3] == ["python", "-m", "receivers"]
    assert int(argv[argv.index("--port") + 1]) == _container_port(receiver, "http")
    assert argv[argv.index("--host") + 1] == "0.0.0.0"  # reachable from the cluster


def _host_service(url: str) -> tuple[str, str]:
    """(service, namespace) of an in-cluster URL's host."""
    host = urlsplit(url).hostname or ""
    service, namespace, *rest = host.split(".")
    assert rest == ["svc", "cluster", "local"], url
    return service, namespace


def test_every_system_has_a_target_that_leads_to_an_object_defined_here():
    targets = _named("ConfigMap", "evbench-targets")["data"]
    assert sorted(targets) == sorted(LOCAL_SUTS)
    channels = {d["metadata"]["name"] for d in _of("InMemoryChannel") + _of("KafkaChannel")}
    for sut, url in targets.items():
        if url.startswith("kafka://"):
            parts = urlsplit(url)
            (source,) = _of("KafkaSource")
            assert parts.path.strip("/") in source["spec"]["topics"], sut
            assert parts.netloc in source["spec"]["bootstrapServers"], sut
            continue
        host = urlsplit(url).hostname
        if host in BROKER_INGRESS:
            namespace, name = urlsplit(url).path.strip("/").split("/")
            broker = _named("Broker", name, namespace)
            assert (
                broker["metadata"]["annotations"]["eventing.knative.dev/broker.class"]
                == BROKER_INGRESS[host]
            ), sut
            continue
        service, namespace = _host_service(url)
        if service.endswith("-kn-channel"):  # a channel's address
            assert service.removesuffix("-kn-channel") in channels, sut
        else:
            _named("Service", service, namespace)


def test_the_kafka_systems_share_one_kafka_and_the_source_topic_has_100_partitions():
    (topic,) = _of("KafkaTopic")
    (source,) = _of("KafkaSource")
    assert topic["spec"]["partitions"] == 100  # the 2019 KafkaSource test
    assert topic["metadata"]["name"] in source["spec"]["topics"]
    config = _named("ConfigMap", "evbench-kafka-broker-config")["data"]
    assert config["bootstrap.servers"] in source["spec"]["bootstrapServers"]


def test_the_sender_job_sends_to_a_target_measures_its_clock_and_serves_its_records():
    (job, sender) = next((w, c) for w, c in _containers() if c["name"] == "sender")
    env = {e["name"]: e for e in sender["env"]}
    key = env["EVBENCH_TARGET"]["valueFrom"]["configMapKeyRef"]
    assert key["name"] == "evbench-targets"
    assert key["key"] in _named("ConfigMap", "evbench-targets")["data"]
    clock = env["EVBENCH_CLOCK"]["value"]
    assert urlsplit(clock).path == "/clock"
    receiver, namespace = _host_service(clock)
    assert _named("Service", receiver, namespace)["spec"]["ports"][0]["port"] == 80
    script = shlex.split(sender["command"][-1].replace(";", " ; "))
    assert "--clock-url" in script and "serve-records" in script
    served = int(script[script.index("--port") + 1])
    assert served == _container_port(sender, "records")
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
