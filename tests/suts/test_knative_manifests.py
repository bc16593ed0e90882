"""The Kubernetes manifests of suts/knative/, checked as a cluster would check them at
`kubectl apply` time, and for what a cluster would accept and still get wrong (events routed
nowhere, a port nothing listens on), without a cluster.

- Custom resources: validated against the `openAPIV3Schema` of the version they name, from the
  CRDs the current releases install (tests/suts/crds/, SOURCES.md says which), as strict field
  validation does: wrong types, missing required fields, unknown fields, versions not served.
- Built-in kinds (Namespace, ConfigMap, Service, Deployment, Job): the fields the API server
  requires and the rules it enforces on them (names, selectors, ports, restart policies).
- Across documents: namespaces, every ref (subscribers, sinks, channels, brokers, broker
  configs, configMapKeyRefs), the broker classes the releases know, and the instruments' own
  command lines, parsed by their real parsers, against the ports and volumes around them.

`manifest_errors(docs)` returns every problem as one line; the table at the end breaks a copy of
the manifests in known ways and expects each break to be reported.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import io
import re
import shlex
from collections import Counter
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from contract.records import DECOY_EVENT_TYPE, EVENT_TYPE, WARMUP_EVENT_TYPE
from evbench.cli import build_parser
from evbench.commands.send import sender_command
from loadgen.pace import resolve_pace
from loadgen.settings import add_sender_arguments
from suts.lab import LOCAL_SUTS

Doc = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
DIR = ROOT / "suts" / "knative"
CRD_DIR = Path(__file__).resolve().parent / "crds"
BUILTIN = {
    "Namespace": "v1",
    "ConfigMap": "v1",
    "Service": "v1",
    "Deployment": "apps/v1",
    "Job": "batch/v1",
}
EXTERNAL_NAMESPACES = {"kafka": {"KafkaTopic"}}  # Strimzi's: its topic operator watches there
BROKER_CLASS = "eventing.knative.dev/broker.class"
BROKER_CLASSES = {"MTChannelBasedBroker", "Kafka"}  # the releases' own constants (SOURCES.md)
KAFKA_BROKER_KEYS = {
    "bootstrap.servers",
    "default.topic.partitions",
    "default.topic.replication.factor",
}
BROKER_INGRESS = {
    "broker-ingress.knative-eventing.svc.cluster.local": "MTChannelBasedBroker",
    "kafka-broker-ingress.knative-eventing.svc.cluster.local": "Kafka",
}
# The image runs as uid 10001: only mounted volumes are writable, not its WORKDIR.
WORKDIR = re.findall(r"^WORKDIR (\S+)", (DIR / "Containerfile").read_text(), re.M)[-1]


def _load() -> list[tuple[str, Doc]]:
    return [
        (path.name, doc)
        for path in sorted(DIR.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc is not None
    ]


def _load_crds() -> dict[tuple[str, str], Doc]:
    """(apiVersion, kind) -> that served version of a CRD (its schema, storage flag)."""
    crds = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            if crd and crd["kind"] == "CustomResourceDefinition":
                spec = crd["spec"]
                for version in spec["versions"]:
                    if version["served"]:
                        key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                        crds[key] = version
    return crds


FILED = _load()
DOCS = [doc for _, doc in FILED]
CRDS = _load_crds()

# ---- the subset of OpenAPI v3 structural schemas the CRDs use --------------------------------

SCHEMA_KEYWORDS = {
    "type", "properties", "required", "items", "additionalProperties", "enum", "minimum",
    "maximum", "format", "nullable", "x-kubernetes-preserve-unknown-fields",
}  # fmt: skip
ANNOTATION_KEYWORDS = {"description", "default", "x-kubernetes-map-type", "x-kubernetes-list-type"}
_TYPES: dict[str, Any] = {
    "object": dict, "array": list, "string": str, "boolean": bool, "integer": int,
    "number": (int, float),
}  # fmt: skip
_FORMAT_BITS = {"int32": 31, "int64": 63}


def schema_errors(value: Any, schema: Doc, path: str) -> list[str]:
    if value is None:
        return [] if schema.get("nullable") else [f"{path}: null"]
    want = schema.get("type")
    if want and (
        not isinstance(value, _TYPES[want])
        or (isinstance(value, bool) and want in ("integer", "number"))
    ):
        return [f"{path}: {type(value).__name__} {value!r} where the schema wants {want}"]
    errors = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not one of {schema['enum']}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        bits = _FORMAT_BITS.get(schema.get("format", ""))
        low = schema.get("minimum", -(2**bits) if bits else None)
        high = schema.get("maximum", 2**bits - 1 if bits else None)
        if (low is not None and value < low) or (high is not None and value > high):
            errors.append(f"{path}: {value} outside {low}..{high}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{path}[{i}]")
    if isinstance(value, dict):
        errors += _object_errors(value, schema, path)
    return errors


def _object_errors(value: Doc, schema: Doc, path: str) -> list[str]:
    props, extra = schema.get("properties", {}), schema.get("additionalProperties")
    errors = [f"{path}.{key}: required" for key in schema.get("required", []) if key not in value]
    for key, item in value.items():
        if key in props:
            errors += schema_errors(item, props[key], f"{path}.{key}")
        elif isinstance(extra, dict):
            errors += schema_errors(item, extra, f"{path}.{key}")
        elif not (extra is True or schema.get("x-kubernetes-preserve-unknown-fields")):
            errors.append(f"{path}.{key}: unknown field (strict field validation refuses it)")
    return errors


def _crd_errors(doc: Doc) -> list[str]:
    version = CRDS.get((doc["apiVersion"], doc["kind"]))
    if version is None:
        return [f"apiVersion {doc['apiVersion']} of {doc['kind']}: not served by the CRDs"]
    # apiVersion and kind are the server's own, metadata is ObjectMeta (_meta_errors)
    body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")}
    return schema_errors(body, version["schema"]["openAPIV3Schema"], "")


# ---- metadata and the built-in kinds ---------------------------------------------------------

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(_LABEL)
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_QUALIFIED = re.compile(rf"({_LABEL}(\.{_LABEL})*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_PORT_NAME = re.compile(r"(?=.*[a-z])[a-z0-9]+(-[a-z0-9]+)*")  # IANA_SVC_NAME, <= 15
META_FIELDS = {"name", "namespace", "labels", "annotations"}


def _name_ok(kind: str, name: Any) -> bool:
    if not isinstance(name, str):
        return False
    if kind in ("Namespace", "Service") or kind.endswith("Channel"):  # a channel names a Service
        pattern = _DNS1123_LABEL if kind == "Namespace" else _DNS1035_LABEL
        return len(name) <= 63 - (len("-kn-channel") if kind.endswith("Channel") else 0) and bool(
            pattern.fullmatch(name)
        )
    return len(name) <= 253 and bool(_SUBDOMAIN.fullmatch(name))


def _meta_errors(doc: Doc) -> list[str]:
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        return ["metadata: missing"]
    errors = [f"metadata.{k}: not an ObjectMeta field set here" for k in set(meta) - META_FIELDS]
    if not _name_ok(doc["kind"], meta.get("name")):
        errors.append(f"metadata.name {meta.get('name')!r}: not a valid {doc['kind']} name")
    if (doc["kind"] == "Namespace") != ("namespace" not in meta):
        errors.append("metadata.namespace: set on a Namespace or missing on a namespaced object")
    errors += _labels_errors(meta.get("labels"), "metadata.labels")
    for key, value in (meta.get("annotations") or {}).items():
        if not (_QUALIFIED.fullmatch(key) and isinstance(value, str)):
            errors.append(f"metadata.annotations.{key}: {value!r} (keys qualified, values strings)")
    return errors


def _labels_errors(labels: Any, path: str) -> list[str]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [f"{path}: not a map"]
    return [
        f"{path}.{key}: {value!r} is not a label value"
        for key, value in labels.items()
        if not (
            _QUALIFIED.fullmatch(str(key))
            and isinstance(value, str)
            and len(value) <= 63
            and _LABEL_VALUE.fullmatch(value)
        )
    ]


def _keys_errors(value: Doc, allowed: set[str], path: str) -> list[str]:
    return [f"{path}.{k}: unknown field" for k in sorted(set(value) - allowed)]


def _configmap_errors(doc: Doc) -> list[str]:
    errors = _keys_errors(doc, {"apiVersion", "kind", "metadata", "data", "immutable"}, "")
    for key, value in (doc.get("data") or {}).items():
        if not re.fullmatch(r"[-._a-zA-Z0-9]+", key):
            errors.append(f"data.{key}: not a valid ConfigMap key")
        if not isinstance(value, str):
            errors.append(f"data.{key}: {value!r} is not a string (a ConfigMap holds strings)")
    return errors


CONTAINER_FIELDS = {
    "name", "image", "command", "args", "workingDir", "ports", "env", "envFrom", "resources",
    "volumeMounts", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle",
    "imagePullPolicy", "securityContext", "terminationMessagePath", "terminationMessagePolicy",
    "restartPolicy", "stdin", "stdinOnce", "tty",
}  # fmt: skip


def _container_errors(c: Doc, path: str, volumes: set[str]) -> list[str]:
    errors = _keys_errors(c, CONTAINER_FIELDS, path)
    if not (isinstance(c.get("name"), str) and _DNS1123_LABEL.fullmatch(c["name"])):
        errors.append(f"{path}.name: missing or not a DNS label")
    if not (isinstance(c.get("image"), str) and c["image"]):
        errors.append(f"{path}.image: missing")
    for key in ("command", "args"):
        if not all(isinstance(a, str) for a in c.get(key, [])):
            errors.append(f"{path}.{key}: every item must be a string")
    names = []
    for port in c.get("ports", []):
        names.append(port.get("name"))
        if not (isinstance(port.get("containerPort"), int) and 0 < port["containerPort"] < 65536):
            errors.append(f"{path}.ports: containerPort {port.get('containerPort')!r}")
        if "name" in port and not (len(port["name"]) <= 15 and _PORT_NAME.fullmatch(port["name"])):
            errors.append(f"{path}.ports: {port['name']!r} is not a port name")
    errors += [f"{path}.ports: {n!r} twice" for n, k in Counter(names).items() if n and k > 1]
    for env in c.get("env", []):
        if not isinstance(env.get("name"), str) or ("value" in env) == ("valueFrom" in env):
            errors.append(f"{path}.env: {env} needs a name and one of value, valueFrom")
        elif "value" in env and not isinstance(env["value"], str):
            errors.append(f"{path}.env.{env['name']}: {env['value']!r} is not a string")
    for mount in c.get("volumeMounts", []):
        if mount.get("name") not in volumes or not str(mount.get("mountPath")).startswith("/"):
            errors.append(f"{path}.volumeMounts: {mount} mounts no volume of the pod")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        action = c.get(probe, {}).get("httpGet") or c.get(probe, {}).get("tcpSocket")
        if action and action.get("port") not in {*names, *_ports(c).values()}:
            errors.append(f"{path}.{probe}: port {action.get('port')!r} is not a container port")
    return errors


def _ports(container: Doc) -> dict[str, int]:
    return {
        p.get("name", str(p["containerPort"])): p["containerPort"]
        for p in container.get("ports", [])
    }


def _pod_errors(template: Doc, path: str, policies: set[str]) -> list[str]:
    spec = template.get("spec") or {}
    errors = _labels_errors((template.get("metadata") or {}).get("labels"), f"{path}.labels")
    if spec.get("restartPolicy", "Always") not in policies:
        errors.append(f"{path}.spec.restartPolicy: {spec.get('restartPolicy', 'Always')!r}, "
                      f"this kind allows {sorted(policies)}")  # fmt: skip
    volumes = {v.get("name") for v in spec.get("volumes", [])}
    if not spec.get("containers"):
        errors.append(f"{path}.spec.containers: none")
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or []):
            errors += _container_errors(c, f"{path}.spec.{key}[{i}]", volumes)
    return errors


def _workload_errors(doc: Doc) -> list[str]:
    spec, kind = doc.get("spec") or {}, doc["kind"]
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if kind == "Job":
        errors = _pod_errors(template, "spec.template", {"Never", "OnFailure"})
        if "selector" in spec:
            errors.append("spec.selector: a Job's is generated; setting it needs manualSelector")
        return errors
    errors = _pod_errors(template, "spec.template", {"Always"})
    selector = (spec.get("selector") or {}).get("matchLabels")
    if not selector or not selector.items() <= labels.items():
        errors.append(f"spec.selector.matchLabels {selector}: must match the template's {labels}")
    if not isinstance(spec.get("replicas", 1), int) or spec.get("replicas", 1) < 0:
        errors.append(f"spec.replicas: {spec.get('replicas')!r}")
    return errors


def _service_errors(doc: Doc) -> list[str]:
    spec = doc.get("spec") or {}
    ports = spec.get("ports") or []
    errors = [] if ports else ["spec.ports: none"]
    names = [p.get("name") for p in ports]
    if len(ports) > 1 and (None in names or len(set(names)) < len(names)):
        errors.append(f"spec.ports: {names}: several ports need unique names")
    for port in ports:
        target = port.get("targetPort", port.get("port"))
        if not (isinstance(port.get("port"), int) and 0 < port["port"] < 65536):
            errors.append(f"spec.ports: port {port.get('port')!r}")
        if not (isinstance(target, int) or _PORT_NAME.fullmatch(str(target))):
            errors.append(f"spec.ports: targetPort {target!r}")
    if spec.get("clusterIP", "None") != "None" or not spec.get("selector"):
        errors.append("spec: a selector (and no fixed clusterIP) expected")
    return errors


BUILTIN_RULES: dict[str, Callable[[Doc], list[str]]] = {
    "Namespace": lambda doc: _keys_errors(doc, {"apiVersion", "kind", "metadata"}, ""),
    "ConfigMap": _configmap_errors,
    "Service": _service_errors,
    "Deployment": _workload_errors,
    "Job": _workload_errors,
}


def doc_errors(doc: Doc) -> list[str]:
    """What the API server would refuse in this one document."""
    if not isinstance(doc.get("kind"), str) or not isinstance(doc.get("apiVersion"), str):
        return ["apiVersion and kind: required"]
    if doc["kind"] in BUILTIN:
        if doc["apiVersion"] != BUILTIN[doc["kind"]]:
            return [f"apiVersion {doc['apiVersion']} of {doc['kind']}: {BUILTIN[doc['kind']]}"]
        body = BUILTIN_RULES[doc["kind"]](doc)
    else:
        body = _crd_errors(doc)
    return _meta_errors(doc) + body


# ---- across documents ------------------------------------------------------------------------


def _ns(doc: Doc) -> str:
    return str(doc["metadata"].get("namespace", ""))


def _find(docs: list[Doc], kind: str, name: str, namespace: str) -> Doc | None:
    found = [
        d
        for d in docs
        if d.get("kind") == kind and d["metadata"]["name"] == name and _ns(d) == namespace
    ]
    return found[0] if len(found) == 1 else None


def _workloads(docs: list[Doc]) -> list[Doc]:
    return [d for d in docs if d["kind"] in ("Deployment", "Job")]


def _containers(workload: Doc) -> list[Doc]:
    return list(workload["spec"]["template"]["spec"]["containers"])


def _selected(service: Doc, docs: list[Doc]) -> list[Doc]:
    selector = service["spec"].get("selector") or {}
    return [
        w
        for w in _workloads(docs)
        if _ns(w) == _ns(service)
        and selector.items() <= w["spec"]["template"]["metadata"].get("labels", {}).items()
    ]


def _endpoints(service: Doc, port: int, docs: list[Doc]) -> list[tuple[Doc, Doc, int]]:
    """(workload, container, containerPort) that the Service's `port` reaches."""
    found = []
    for spec_port in service["spec"]["ports"]:
        if spec_port["port"] != port:
            continue
        target = spec_port.get("targetPort", port)
        for workload in _selected(service, docs):
            for container in _containers(workload):
                ports = _ports(container)
                if target in ports or target in ports.values():
                    found.append((workload, container, ports.get(target, target)))
    return found


def _service_errors_across(service: Doc, docs: list[Doc]) -> list[str]:
    name = f"Service {service['metadata']['name']}"
    if not _selected(service, docs):
        return [f"{name}: selects no workload here"]
    return [
        f"{name}: port {p['port']} (targetPort {p.get('targetPort')!r}) reaches no container port"
        for p in service["spec"]["ports"]
        if not _endpoints(service, p["port"], docs)
    ]


def _reached(url: str, namespace: str, docs: list[Doc], role: str) -> str | None:
    """Why an in-cluster URL does not lead to a container running `role`, or None."""
    parts = urlsplit(url if "//" in url else f"//{url}")
    host = (parts.hostname or "").split(".")
    if host[2:] not in ([], ["svc"], ["svc", "cluster", "local"]) or not all(host):
        return f"{url}: not a Service address"
    service = _find(docs, "Service", host[0], host[1] if len(host) > 1 else namespace)
    if service is None:
        return f"{url}: no Service {host[0]} here"
    port = parts.port or 80
    for _, container, container_port in _endpoints(service, port, docs):
        if any(
            c.listens == container_port
            for c in _calls(container, namespace, docs)[0]
            if c.role == role
        ):
            return None
    return f"{url}: Service {host[0]} port {port} reaches no `{role}` listening there"


def _destination_errors(doc: Doc, key: str, docs: list[Doc]) -> list[str]:
    where = f"{doc['kind']} {doc['metadata']['name']} spec.{key}"
    dest = (doc.get("spec") or {}).get(key) or {}
    if "ref" not in dest:
        return [] if dest.get("uri") else [f"{where}: needs a ref or a uri"]
    ref = dest["ref"]
    found = _find(docs, ref.get("kind", ""), ref.get("name", ""), ref.get("namespace", _ns(doc)))
    if found is None or found["apiVersion"] != ref.get("apiVersion"):
        return [f"{where}.ref: no {ref.get('apiVersion')} {ref.get('kind')} {ref.get('name')} here"]
    if (
        found["kind"] == "Service"
    ):  # Knative addresses a Service as http://NAME.NS.svc.cluster.local/
        why = _reached(
            f"http://{ref['name']}.{_ns(found)}.svc.cluster.local/", _ns(doc), docs, "receive"
        )
        return [f"{where}.ref: {why}"] if why else []
    return []


def _broker_errors(broker: Doc, docs: list[Doc]) -> list[str]:
    name = f"Broker {broker['metadata']['name']}"
    cls = broker["metadata"].get("annotations", {}).get(BROKER_CLASS)
    if cls not in BROKER_CLASSES:
        return [f"{name}: broker class {cls!r} is none of the releases' {sorted(BROKER_CLASSES)}"]
    ref = broker["spec"].get("config") or {}
    config = _find(docs, "ConfigMap", ref.get("name", ""), ref.get("namespace", _ns(broker)))
    if (ref.get("apiVersion"), ref.get("kind")) != ("v1", "ConfigMap") or config is None:
        return [f"{name}: spec.config names no ConfigMap here"]
    data = config.get("data") or {}
    if cls == "Kafka":
        return [f"{name}: its config lacks {k}" for k in sorted(KAFKA_BROKER_KEYS - set(data))]
    template = yaml.safe_load(data.get("channel-template-spec", "")) or {}
    if (template.get("apiVersion"), template.get("kind")) not in CRDS:
        return [f"{name}: channel-template-spec {template} is no served channel"]
    return []


def _knative_errors(doc: Doc, docs: list[Doc]) -> list[str]:
    """What the Knative webhooks refuse, and refs that would resolve to nothing."""
    spec, kind = doc.get("spec") or {}, doc["kind"]
    if kind == "Broker":
        return _broker_errors(doc, docs)
    if kind == "Trigger":
        errors = _destination_errors(doc, "subscriber", docs)
        if _find(docs, "Broker", str(spec.get("broker")), _ns(doc)) is None:
            errors.append(f"Trigger {doc['metadata']['name']}: no Broker {spec.get('broker')} here")
        return errors
    if kind == "Subscription":
        channel = spec.get("channel") or {}
        found = _find(docs, channel.get("kind", ""), channel.get("name", ""), _ns(doc))
        errors = _destination_errors(doc, "subscriber", docs)
        if found is None or found["apiVersion"] != channel.get("apiVersion"):
            errors.append(f"Subscription {doc['metadata']['name']}: no channel {channel} here")
        return errors
    if kind == "KafkaSource":
        return _destination_errors(doc, "sink", docs)
    return []


def _namespace_errors(docs: list[Doc]) -> list[str]:
    defined = {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"}
    keys = Counter((d["kind"], _ns(d), d["metadata"]["name"]) for d in docs)
    return [f"{k}: defined {n} times" for k, n in keys.items() if n > 1] + [
        f"{d['kind']} {d['metadata']['name']}: namespace {_ns(d)!r} is not created here"
        for d in docs
        if d["kind"] != "Namespace"
        and _ns(d) not in defined
        and d["kind"] not in EXTERNAL_NAMESPACES.get(_ns(d), set())
    ]


# ---- the instruments' command lines ----------------------------------------------------------


class Call:
    """One instrument a container runs: its role and its flags, parsed by the real parser."""

    def __init__(self, role: str, args: argparse.Namespace) -> None:
        self.role, self.args = role, args
        bind = {"receive": ("host", "port"), "serve-records": ("host", "port")}.get(
            role, ("bind_host", "bind_port") if role == "master" else ("", "")
        )
        self.host: str | None = getattr(args, bind[0], None) if bind[0] else None
        self.listens: int | None = getattr(args, bind[1], None) if bind[1] else None

    def writes(self) -> list[str]:
        names = {
            "master": ["out", "locust_html", "locust_csv"],
            "worker": ["out", "log_dir"],
            "serve-records": [],
        }
        paths = [getattr(self.args, n) for n in names.get(self.role, ["out"])]
        return [str(p) for p in paths if p is not None]


def _master_parser() -> argparse.ArgumentParser:
    """loadgen/fleet/__main__.py's master flags (importing it would import Locust, which
    monkey-patches this process); test_the_mirrored_fleet_flags_exist holds them to it."""
    parser = argparse.ArgumentParser(prog="evbench send --master")
    add_sender_arguments(parser)
    parser.add_argument("--bind-host", default="127.0.0.1")
    parser.add_argument("--bind-port", type=int, default=5557)
    parser.add_argument("--expect-timeout", type=float, default=60.0)
    parser.add_argument("--locust-csv")
    parser.add_argument("--locust-html")
    return parser


def _worker_parser() -> argparse.ArgumentParser:
    """loadgen/fleet/worker.py's flags (as _master_parser); --log-dir defaults to the cwd, which
    is the image's WORKDIR in a pod."""
    parser = argparse.ArgumentParser(prog="evbench send --worker")
    parser.add_argument("--master-host", default="127.0.0.1")
    parser.add_argument("--master-port", type=int, default=5557)
    parser.add_argument("--out")
    parser.add_argument("--log-dir", default=WORKDIR)
    return parser


def _sender_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evbench send")
    add_sender_arguments(parser)
    return parser


PYTHON_M = {"evbench": [], "receivers": ["receive"], "loadgen": ["send"]}


def _parsed(argv: list[str]) -> Call | None:
    """The instrument `argv` starts (None: a shell helper); SystemExit if it would not start."""
    argv = argv[1:] if argv[:1] == ["exec"] else argv
    if argv[:2] == ["python", "-m"] and argv[2:3] and argv[2] in PYTHON_M:
        argv = ["evbench", *PYTHON_M[argv[2]], *argv[3:]]
    if argv[:1] in (["sleep"], ["mkdir"]):
        return None
    if argv[:1] != ["evbench"] or argv[1:2] not in (["send"], ["receive"], ["serve-records"]):
        raise SystemExit(f"`{shlex.join(argv)}`: not an instrument of the image")
    if argv[1] != "send":
        return Call(argv[1], build_parser().parse_args(argv[1:]))
    module, *rest = sender_command(argv[2:])
    if module == "loadgen":
        return Call("send", _sender_parser().parse_args(rest))
    role, *flags = rest
    return Call(
        role, (_master_parser() if role == "master" else _worker_parser()).parse_args(flags)
    )


def _env(container: Doc, namespace: str, docs: list[Doc]) -> dict[str, str]:
    values = {}
    for env in container.get("env", []):
        ref = (env.get("valueFrom") or {}).get("configMapKeyRef") or {}
        config = _find(docs, "ConfigMap", ref.get("name", ""), namespace)
        if "value" in env:
            values[env["name"]] = str(env["value"])
        elif config is not None and ref.get("key") in (config.get("data") or {}):
            values[env["name"]] = config["data"][ref["key"]]
    return values


def _calls(container: Doc, namespace: str, docs: list[Doc]) -> tuple[list[Call], list[str]]:
    """The instruments a container runs (`sh -c` scripts split at `;` and `&&`, $VARS filled
    from its env), and why any would not start."""
    argv = [*container.get("command", []), *container.get("args", [])]
    scripts = [argv[2]] if argv[:2] == ["sh", "-c"] else None
    env = _env(container, namespace, docs)
    segments = [shlex.split(s) for s in re.split(r";|&&", scripts[0])] if scripts else [argv]
    calls, errors = [], []
    for segment in filter(None, segments):
        words = [re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m[1], m[0]), w) for w in segment]
        errors += [f"`{w}`: its variable is not in the container's env" for w in words if "$" in w]
        with contextlib.redirect_stderr(io.StringIO()) as stderr:
            try:
                call = _parsed(words)
            except SystemExit as exc:
                errors.append(f"`{shlex.join(words)}` would not start: {stderr.getvalue() or exc}")
                continue
        if call is not None:
            calls.append(call)
    return calls, errors


def _instrument_errors(workload: Doc, container: Doc, docs: list[Doc]) -> list[str]:
    """A container's instruments against its ports and volumes, and the URLs they are given."""
    where = f"{workload['kind']} {workload['metadata']['name']} container {container['name']}"
    calls, errors = _calls(container, _ns(workload), docs)
    ports, mounts = _ports(container), [m["mountPath"] for m in container.get("volumeMounts", [])]
    listening = {c.listens for c in calls if c.listens is not None}
    for call in calls:
        if call.listens is not None and call.host != "0.0.0.0":
            errors.append(f"{where}: {call.role} binds {call.host}, unreachable from other pods")
        errors += [
            f"{where}: {call.role} writes {path}, on no volume (only volumes are writable)"
            for path in call.writes()
            if not any(PurePosixPath(path).is_relative_to(m) for m in mounts)
        ]
        if call.role in ("send", "master"):
            errors += _sender_errors(call, where, _ns(workload), docs)
    errors += [f"{where}: {call.role} listens on {p}, no containerPort" for call in calls
               if (p := call.listens) is not None and p not in ports.values()]  # fmt: skip
    errors += [f"{where}: containerPort {n} ({p}): nothing listens there"
               for n, p in ports.items() if p not in listening]  # fmt: skip
    written = {str(p) for c in calls if c.role in ("send", "worker") for p in [c.args.out]}
    errors += [f"{where}: serve-records serves {c.args.directory}, not the records written"
               for c in calls
               if c.role == "serve-records" and str(c.args.directory) not in written]  # fmt: skip
    return errors


def _sender_errors(call: Call, where: str, namespace: str, docs: list[Doc]) -> list[str]:
    errors = []
    try:
        resolve_pace(call.args.pace)
    except Exception as exc:
        errors.append(f"{where}: pace {call.args.pace!r}: {exc}")
    clock = call.args.clock_url
    if clock is None or urlsplit(clock).path != "/clock":
        errors.append(f"{where}: --clock-url {clock!r} is no receiver clock")
    elif why := _reached(clock, namespace, docs, "receive"):
        errors.append(f"{where}: --clock-url {why}")
    if call.args.target not in _named_data(docs, "evbench-targets", namespace).values():
        errors.append(f"{where}: --target {call.args.target!r} is none of evbench-targets")
    return errors


def _named_data(docs: list[Doc], name: str, namespace: str) -> dict[str, str]:
    config = _find(docs, "ConfigMap", name, namespace)
    return dict((config or {}).get("data") or {})


def _fleet_errors(docs: list[Doc]) -> list[str]:
    """The master expects as many workers as the worker Deployment runs, and they reach it."""
    roles: dict[str, list[tuple[Doc, Call]]] = {"master": [], "worker": []}
    for workload in _workloads(docs):
        for container in _containers(workload):
            for call in _calls(container, _ns(workload), docs)[0]:
                roles.get(call.role, []).append((workload, call))
    if not roles["master"] and not roles["worker"]:
        return []
    if len(roles["master"]) != 1 or len(roles["worker"]) != 1:
        return [f"the fleet: one master and one worker Deployment, not {roles}"]
    (master, lead), (workers, follower) = roles["master"][0], roles["worker"][0]
    errors = [f"the fleet: {w['kind']} {w['metadata']['name']} is not a Deployment"
              for w in (master, workers) if w["kind"] != "Deployment"]  # fmt: skip
    if master["spec"].get("replicas", 1) != 1:
        errors.append("the fleet: one master replica")
    if workers["spec"].get("replicas", 1) != lead.args.workers:
        errors.append(f"the fleet: --workers {lead.args.workers} but "
                      f"{workers['spec'].get('replicas', 1)} worker replicas")  # fmt: skip
    address = f"{follower.args.master_host}:{follower.args.master_port}"
    if why := _reached(address, _ns(workers), docs, "master"):
        errors.append(f"the fleet: --master-host/--master-port {why}")
    return errors


def manifest_errors(docs: list[Doc]) -> list[str]:
    """Every problem found in these documents, one line each, naming the document."""
    errors = [
        f"{d.get('kind')} {d.get('metadata', {}).get('name')}: {e}"
        for d in docs
        for e in doc_errors(d)
    ]
    if errors:  # the cross-checks assume well-formed documents
        return errors
    errors += _namespace_errors(docs)
    for doc in docs:
        if doc["kind"] == "Service":
            errors += _service_errors_across(doc, docs)
        elif doc["kind"] in ("Deployment", "Job"):
            errors += [e for c in _containers(doc) for e in _instrument_errors(doc, c, docs)]
        elif doc["kind"] not in BUILTIN:
            errors += _knative_errors(doc, docs)
    return errors + _fleet_errors(docs)


# ---- the tests -------------------------------------------------------------------------------


def _of(kind: str) -> list[Doc]:
    return [d for d in DOCS if d["kind"] == kind]


def _named(kind: str, name: str, namespace: str = "evbench") -> Doc:
    found = _find(DOCS, kind, name, namespace)
    assert found is not None, f"{kind} {namespace}/{name}: not defined once"
    return found


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_the_crds_are_the_release_files_sources_md_names():
    table = re.findall(
        r"^\| (\S+\.yaml) \|.*\| ([0-9a-f]{40}) \|$", (CRD_DIR / "SOURCES.md").read_text(), re.M
    )
    assert sorted(name for name, _ in table) == sorted(p.name for p in CRD_DIR.glob("*.yaml"))
    for name, blob in table:
        assert _blob_id((CRD_DIR / name).read_bytes()) == blob, f"{name} is not the release's"


def _keywords(schema: Doc) -> set[str]:
    found = set(schema)
    nested = [*schema.get("properties", {}).values(), schema.get("items")]
    for sub in [*nested, schema.get("additionalProperties")]:
        if isinstance(sub, dict):
            found |= _keywords(sub)
    return found


def test_the_validator_knows_every_keyword_the_crds_use():
    used = set().union(*(_keywords(v["schema"]["openAPIV3Schema"]) for v in CRDS.values()))
    assert used - SCHEMA_KEYWORDS - ANNOTATION_KEYWORDS == set()


def test_the_mirrored_fleet_flags_exist():
    fleet = (ROOT / "loadgen" / "fleet" / "__main__.py").read_text()
    worker = (ROOT / "loadgen" / "fleet" / "worker.py").read_text()
    for flag in ("--bind-host", "--bind-port", "--expect-timeout", "--locust-csv", "--locust-html"):
        assert f'"{flag}"' in fleet
    for flag in ("--master-host", "--master-port", "--out", "--log-dir"):
        assert f'"{flag}"' in worker
    assert "default=5557" in fleet and "default=5557" in worker
    assert "default=Path(os.getcwd())" in worker  # hence _worker_parser's WORKDIR


def test_every_document_is_of_a_kind_validated_here():
    assert {f for f, _ in FILED} == {p.name for p in DIR.glob("*.yaml")}
    kinds = {(d["apiVersion"], d["kind"]) for d in DOCS}
    assert kinds <= {(v, k) for k, v in BUILTIN.items()} | set(CRDS)


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_each_document_is_one_the_api_server_accepts(doc):
    assert doc_errors(doc) == []


def test_names_refs_ports_and_commands_agree_across_documents():
    assert manifest_errors(DOCS) == []


def test_brokers_have_triggers_for_measured_and_warmup_events_only():
    for broker in _of("Broker"):
        types = [
            t["spec"]["filter"]["attributes"]["type"]
            for t in _of("Trigger")
            if t["spec"]["broker"] == broker["metadata"]["name"]
        ]
        assert sorted(types) == sorted([EVENT_TYPE, WARMUP_EVENT_TYPE])
    assert all(
        t["spec"]["filter"]["attributes"]["type"] != DECOY_EVENT_TYPE for t in _of("Trigger")
    )


def test_every_system_has_a_target_that_leads_to_an_object_defined_here():
    targets = _named("ConfigMap", "evbench-targets")["data"]
    assert sorted(targets) == sorted(LOCAL_SUTS)
    channels = {d["metadata"]["name"] for d in _of("InMemoryChannel") + _of("KafkaChannel")}
    for sut, url in targets.items():
        parts = urlsplit(url)
        if url.startswith("kafka://"):
            (source,) = _of("KafkaSource")
            assert parts.path.strip("/") in source["spec"]["topics"], sut
            assert parts.netloc in source["spec"]["bootstrapServers"], sut
        elif parts.hostname in BROKER_INGRESS:
            namespace, name = parts.path.strip("/").split("/")
            broker = _named("Broker", name, namespace)
            assert broker["metadata"]["annotations"][BROKER_CLASS] == BROKER_INGRESS[parts.hostname]
        elif (parts.hostname or "").split(".")[0].endswith("-kn-channel"):  # a channel's Service
            assert parts.hostname.split(".")[0].removesuffix("-kn-channel") in channels, sut
        else:
            assert _reached(url, "evbench", DOCS, "receive") is None, sut


def test_the_kafka_systems_share_one_kafka_and_the_source_topic_has_100_partitions():
    (topic,) = _of("KafkaTopic")
    (source,) = _of("KafkaSource")
    assert topic["spec"]["partitions"] == 100  # the 2019 KafkaSource test
    assert topic["metadata"]["name"] in source["spec"]["topics"]
    assert topic["metadata"]["labels"]["strimzi.io/cluster"] == "my-cluster"
    config = _named("ConfigMap", "evbench-kafka-broker-config")["data"]
    assert config["bootstrap.servers"] in source["spec"]["bootstrapServers"]


def test_every_sender_pod_serves_its_records_through_a_service():
    """What `evbench collect` fetches: the receiver's own /records (its Service), and every
    sender's records from `evbench serve-records` (a Service port on each sender pod)."""
    served = []
    for workload in [*_of("Job"), *_of("Deployment")]:
        for container in _containers(workload):
            calls = _calls(container, "evbench", DOCS)[0]
            if {c.role for c in calls} & {"send", "worker"}:
                (serve,) = [c for c in calls if c.role == "serve-records"]
                served.append((workload, serve.listens))
    assert {w["metadata"]["name"] for w, _ in served} == {"evbench-sender", "evbench-fleet-worker"}
    services = _of("Service")
    for workload, port in served:
        assert any(
            e[0] is workload and e[2] == port
            for s in services
            for p in s["spec"]["ports"]
            for e in _endpoints(s, p["port"], DOCS)
        ), workload["metadata"]["name"]
    assert (
        _reached("evbench-receiver.evbench.svc.cluster.local", "evbench", DOCS, "receive") is None
    )


# ---- the validator fails on broken manifests -------------------------------------------------


def _set(*path_and_value: Any) -> Callable[[Doc], None]:
    """A mutation: set the value at a path of keys and list indexes (None: delete it)."""
    *path, value = path_and_value

    def mutate(doc: Doc) -> None:
        *parents, last = path
        for key in parents:
            doc = doc[key]
        if value is None:
            del doc[last]
        else:
            doc[last] = value

    return mutate


def _edit_script(old: str, new: str) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        command = doc["spec"]["template"]["spec"]["containers"][0]["command"]
        assert old in command[-1]
        command[-1] = command[-1].replace(old, new)

    return mutate


def _replace_arg(old: str, new: str) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        command = doc["spec"]["template"]["spec"]["containers"][0]["command"]
        command[command.index(old)] = new

    return mutate


POD = ("spec", "template", "spec")
C0 = (*POD, "containers", 0)
IMC_BETA = "apiVersion: messaging.knative.dev/v1beta1\nkind: InMemoryChannel"
BROKEN = [  # (kind, name, mutation, what the report must say)
    ("KafkaTopic", "evbench-source", _set("apiVersion", "kafka.strimzi.io/v1beta2"), "not served"),
    ("InMemoryChannel", "evbench-imc", _set("apiVersion", "messaging.knative.dev/v1beta1"),
     "not served"),
    ("KafkaChannel", "evbench-kafka", _set("spec", "numPartitions", "10"), "wants integer"),
    ("KafkaChannel", "evbench-kafka", _set("spec", "replicationFactor", 40000), "outside"),
    ("KafkaSource", "evbench-source", _set("spec", "topics", None), ".spec.topics: required"),
    ("KafkaSource", "evbench-source", _set("spec", "topic", ["x"]), ".spec.topic: unknown field"),
    ("Subscription", "evbench-imc", _set("spec", "subscriber", "uri", 5), "wants string"),
    ("Broker", "evbench-kafka", _set("metadata", "annotations", BROKER_CLASS, "Kafka2"),
     "broker class"),
    ("Broker", "evbench-imc", _set("spec", "config", "name", "nope"), "names no ConfigMap"),
    ("ConfigMap", "evbench-kafka-broker-config", _set("data", "bootstrap.servers", None),
     "lacks bootstrap.servers"),
    ("ConfigMap", "evbench-imc-broker-config", _set("data", "channel-template-spec", IMC_BETA),
     "no served channel"),
    ("ConfigMap", "evbench-kafka-broker-config", _set("data", "default.topic.partitions", 10),
     "not a string"),
    ("Trigger", "evbench-imc-measure", _set("spec", "broker", "nope"), "no Broker nope"),
    ("Subscription", "evbench-kafka", _set("spec", "channel", "name", "nope"), "no channel"),
    ("KafkaSource", "evbench-source", _set("spec", "sink", "ref", "name", "nope"),
     "no v1 Service nope"),
    ("Trigger", "evbench-kafka-warmup", _set("spec", "subscriber", {}), "needs a ref or a uri"),
    ("Service", "evbench-receiver", _set("spec", "ports", 0, "port", 8080), "reaches no `receive`"),
    ("Service", "evbench-sender", _set("spec", "ports", 0, "targetPort", "web"),
     "reaches no container port"),
    ("Service", "evbench-sender", _set("spec", "selector", "app", "nope"), "selects no workload"),
    ("Deployment", "evbench-receiver", _replace_arg("8080", "9090"), "no containerPort"),
    ("Deployment", "evbench-receiver", _replace_arg("0.0.0.0", "127.0.0.1"), "unreachable"),
    ("Deployment", "evbench-receiver", _set(*C0, "readinessProbe", "httpGet", "port", "web"),
     "not a container port"),
    ("Deployment", "evbench-receiver", _set("spec", "selector", "matchLabels", "app", "x"),
     "must match"),
    ("Deployment", "evbench-receiver", _set(*C0, "image", None), "image: missing"),
    ("Deployment", "evbench-receiver", _set(*C0, "comand", ["x"]), "comand: unknown field"),
    ("Deployment", "evbench-receiver", _set(*POD, "volumes", []), "mounts no volume"),
    ("Job", "evbench-sender", _set(*POD, "restartPolicy", "Always"), "restartPolicy"),
    ("Job", "evbench-sender", _edit_script("--pace", "--rate"), "would not start"),
    ("Job", "evbench-sender", _edit_script('"$EVBENCH_PACE"', "9k-9k"), "unknown pace"),
    ("Job", "evbench-sender", _set(*C0, "env", 2, "value", "http://evbench-receiver/clocks"),
     "no receiver clock"),
    ("Job", "evbench-sender", _set(*C0, "env", 2, "value", "http://evbench-sender:8081/clock"),
     "reaches no `receive`"),
    ("Job", "evbench-sender", _edit_script("serve-records /data/sent", "serve-records /data"),
     "not the records written"),
    ("Job", "evbench-sender", _set(*C0, "env", 0, "valueFrom", "configMapKeyRef", "key", "no"),
     "not in the container's env"),
    ("Deployment", "evbench-fleet-worker", _set("spec", "replicas", 3), "3 worker replicas"),
    ("Deployment", "evbench-fleet-worker", _edit_script(" --log-dir /data/logs", ""),
     "writes /opt/evbench, on no volume"),
    ("Deployment", "evbench-fleet-worker", _edit_script("--master-port 5557", "--master-port 80"),
     "--master-host/--master-port"),
    ("Deployment", "evbench-fleet-master", _edit_script("--bind-port 5557", "--bind-port 5558"),
     "listens on 5558, no containerPort"),
    ("Service", "evbench-fleet-master", _set("metadata", "name", "evbench_master"),
     "not a valid Service name"),
    ("Service", "evbench-fleet-workers", _set("metadata", "namespace", "default"),
     "not created here"),
    ("Namespace", "evbench", _set("metadata", "labels", {"a": "b c"}), "not a label value"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "name", "mutate", "expected"), BROKEN, ids=[f"{k}-{e}" for k, _, _, e in BROKEN]
)
def test_a_broken_manifest_is_reported(kind, name, mutate, expected):
    docs = copy.deepcopy(DOCS)
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    mutate(doc)
    errors = manifest_errors(docs)
    assert any(expected in e for e in errors), errors


def test_a_name_defined_twice_is_reported():
    docs = copy.deepcopy(DOCS)
    docs.append(copy.deepcopy(_named("Service", "evbench-receiver")))
    assert any("defined 2 times" in e for e in manifest_errors(docs))
