"""Hosts on this machine: one network namespace per host, each joined by a veth pair to a bridge
inside a "switch" namespace of its own, on the RFC 2544 benchmarking range 198.18.0.0/24.

Nothing is added to the root namespace and no namespace has a default route, so whatever the
instruments send can only reach the other namespaces. Every process is started with
`ip netns exec` (which execs the command: the Popen's pid is the command's), kept, and stopped
by its pid; the namespaces go when the `network` context ends, a failing test included.

Also an entry point for what runs inside a namespace:
    python -m tests.e2e.netns hop --host 198.18.0.2 --port 8000 --subscriber URL
    python -m tests.e2e.netns wait URL [--until KEY=VALUE ...] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from runtime.procs import Child

REPO = Path(__file__).resolve().parents[2]
SUBNET = "198.18.0"  # RFC 2544: reserved for benchmarks, routed nowhere
PREFIX_LEN = 24


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


def _child_env() -> dict[str, str]:
    """The test's environment without proxies (a proxy would be asked for a namespace's address
    and is unreachable from inside anyway), with the repository importable (the hop)."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


@dataclass
class Host:
    name: str  # a, b, c
    netns: str
    address: str
    logs: Path
    children: list[Child] = field(default_factory=list)

    def start(self, role: str, argv: Sequence[str]) -> Child:
        """`argv` running in this host's namespace; stdout read as JSON lines, stderr logged."""
        child = Child(
            f"{role}@{self.name}",
            ["ip", "netns", "exec", self.netns, *argv],
            self.logs / f"{self.name}-{role}.log",
            env=_child_env(),
        )
        self.children.append(child)
        return child

    def evbench(self, role: str, *args: str) -> Child:
        return self.start(role, [sys.executable, "-m", "evbench", *args])

    def run(self, argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        """A command run to its end in this namespace (`evbench collect`, a wait)."""
        return subprocess.run(
            ["ip", "netns", "exec", self.netns, *argv],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=_child_env(),
            cwd=REPO,
        )

    def wait_json(self, url: str, timeout_s: float, **until: int) -> dict[str, Any]:
        """GET `url` from this host until its JSON has every `until` key at its value (or just
        answers), within `timeout_s`: one process polling, not one per poll."""
        wants = [f"--until={key}={value}" for key, value in until.items()]
        argv = [sys.executable, "-m", "tests.e2e.netns", "wait", url, f"--timeout={timeout_s}"]
        done = self.run([*argv, *wants], timeout_s + 30)
        assert done.returncode == 0, f"from {self.name} ({self.address}): {done.stderr}"
        doc: dict[str, Any] = json.loads(done.stdout)
        return doc


@dataclass
class Network:
    prefix: str  # evb-<6 hex>: namespaces of parallel or leftover runs never clash
    logs: Path
    hosts: dict[str, Host] = field(default_factory=dict)
    namespaces: list[str] = field(default_factory=list)

    @property
    def switch(self) -> str:
        return f"{self.prefix}-sw"

    def build(self, names: Sequence[str]) -> None:
        self._add_namespace(self.switch, skip_on_failure=True)
        self._must("-n", self.switch, "link", "add", "name", "br0", "type", "bridge")
        self._must("-n", self.switch, "link", "set", "lo", "up")
        self._must("-n", self.switch, "link", "set", "br0", "up")
        for number, name in enumerate(names, start=1):
            self._add_host(name, f"{SUBNET}.{number}")

    def _add_host(self, name: str, address: str) -> None:
        netns = f"{self.prefix}-{name}"
        self._add_namespace(netns, skip_on_failure=False)
        port = f"to-{name}"  # the switch's end; the host's end is its eth0
        self._must(
            "-n", self.switch, "link", "add", "name", port, "type", "veth",
            "peer", "name", "eth0", "netns", netns,
        )  # fmt: skip
        self._must("-n", self.switch, "link", "set", port, "master", "br0")
        self._must("-n", self.switch, "link", "set", port, "up")
        self._must("-n", netns, "addr", "add", f"{address}/{PREFIX_LEN}", "dev", "eth0")
        self._must("-n", netns, "link", "set", "eth0", "up")
        self._must("-n", netns, "link", "set", "lo", "up")
        self.hosts[name] = Host(name, netns, address, self.logs)

    def _add_namespace(self, netns: str, skip_on_failure: bool) -> None:
        done = _ip("netns", "add", netns)
        if done.returncode != 0:
            reason = f"`ip netns add` failed here: {done.stderr.strip()}"
            if skip_on_failure:
                pytest.skip(reason)
            raise RuntimeError(reason)
        self.namespaces.append(netns)

    def _must(self, *args: str) -> None:
        done = _ip(*args)
        if done.returncode != 0:
            # A kernel without veth or bridge support (or a sandbox forbidding them): skipped.
            pytest.skip(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")

    def routes(self, netns: str) -> list[str]:
        return _ip("-n", netns, "route", "show").stdout.strip().splitlines()

    def close(self) -> list[str]:
        """Stop every process started here (SIGTERM, then SIGKILL), whatever is still inside
        a namespace (a fleet worker's sender), by pid, then delete the namespaces; returns what
        could not be done."""
        problems = []
        for host in self.hosts.values():
            for child in reversed(host.children):
                if child.alive():
                    try:
                        child.stop(timeout_s=10)
                    except Exception as exc:  # the others are still stopped
                        problems.append(f"{child.name}: {exc!r}")
        for netns in reversed(self.namespaces):
            for pid in _ip("netns", "pids", netns).stdout.split():
                with suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            if (done := _ip("netns", "del", netns)).returncode != 0:
                problems.append(f"ip netns del {netns}: {done.stderr.strip()}")
        return problems


def namespace_of(pid: int) -> str:
    """The named namespace a process runs in, as the kernel says ("" for the root one)."""
    return _ip("netns", "identify", str(pid)).stdout.strip()


@contextmanager
def network(logs: Path, names: Sequence[str] = ("a", "b", "c")) -> Iterator[Network]:
    """Hosts `names` at 198.18.0.1, .2, ... (skipped, saying why, where they cannot be made)."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command (Debian's iproute2; `make test` installs it)")
    net = Network(f"evb-{secrets.token_hex(3)}", logs)
    try:
        net.build(names)
        yield net
    finally:
        if problems := net.close():
            print("netns cleanup: " + "; ".join(problems), file=sys.stderr)


# what runs inside a namespace ----------------------------------------------------------------
def _hop(host: str, port: int, subscriber: str) -> int:
    """tests/e2e/hops.py's HTTP hop, served on `host` (it binds loopback itself, which another
    host cannot reach): its handler on a server of our own, until SIGTERM; then its counts."""
    from tests.e2e.hops import HttpHop

    hop = HttpHop(subscriber)
    server = ThreadingHTTPServer((host, port), hop.server.RequestHandlerClass)
    server.daemon_threads = True

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    listening = {"event": "listening", "host": host, "port": server.server_address[1]}
    print(json.dumps(listening), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        hop.close()  # forwards what it queued first
    forwarder = hop.forwarder
    counts = {"forwarded": forwarder.forwarded, "undeliverable": forwarder.undeliverable}
    print(json.dumps({"event": "stopped", "stats": counts}), flush=True)
    return 0


def _wait(url: str, until: list[str], timeout_s: float) -> int:
    wanted = {key: int(value) for key, value in (item.split("=", 1) for item in until)}
    deadline = time.monotonic() + timeout_s
    doc: dict[str, Any] | None = None
    last_error = ""
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                doc = json.load(answer)
            if all(doc.get(key) == value for key, value in wanted.items()):
                print(json.dumps(doc))
                return 0
        except OSError as exc:  # not listening yet, or the address not up yet
            last_error = repr(exc)
        if time.monotonic() > deadline:
            print(
                f"{url}: not {wanted} within {timeout_s:g} s: {doc} {last_error}", file=sys.stderr
            )
            return 1
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.netns")
    roles = parser.add_subparsers(dest="role", required=True)
    hop = roles.add_parser("hop", help="an HTTP hop forwarding to --subscriber")
    hop.add_argument("--host", required=True)
    hop.add_argument("--port", type=int, default=8000)
    hop.add_argument("--subscriber", required=True)
    wait = roles.add_parser("wait", help="GET a JSON URL until its keys hold the values")
    wait.add_argument("url")
    wait.add_argument("--until", action="append", default=[], metavar="KEY=VALUE")
    wait.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    if args.role == "hop":
        return _hop(args.host, args.port, args.subscriber)
    return _wait(args.url, args.until, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
