"""Binary-mode CloudEvents over HTTP with geventhttpclient (Locust's FastHttpUser client).

Used directly rather than through FastHttpSession: Locust's per-request stats and event hooks
cost CPU on the hot path, and the engine records every attempt itself.
"""

from __future__ import annotations

from geventhttpclient import HTTPClient
from geventhttpclient.url import URL

from evbench.records import EVENT_ID_HEADER


class HttpTransport:
    def __init__(
        self,
        url: str,
        source: str,
        max_connections: int,
        connect_timeout_s: float = 5.0,
        request_timeout_s: float = 30.0,
    ) -> None:
        parsed = URL(url)
        if parsed.scheme not in ("http", "https"):
            raise ValueError(f"target '{url}' is not an http(s) URL")
        self.path = parsed.request_uri or "/"
        self.source = source
        # POST is never retried by the client (RFC 9110 §9.2.2), so it cannot duplicate events.
        self.client = HTTPClient.from_url(
            parsed,
            concurrency=max_connections,
            connection_timeout=connect_timeout_s,
            network_timeout=request_timeout_s,
        )

    def send(self, event_id: str, payload: bytes, ce_type: str) -> tuple[int, str | None, bool]:
        headers = {
            "ce-specversion": "1.0",
            "ce-id": event_id,
            EVENT_ID_HEADER: event_id,
            "ce-source": self.source,
            "ce-type": ce_type,
            "content-type": "application/json",
        }
        try:
            response = self.client.request("POST", self.path, body=payload, headers=headers)
        except Exception as exc:  # every transport failure is a recorded send failure
            return 0, f"{type(exc).__name__}: {exc}"[:500], False
        try:
            response.read()
            status = response.status_code
        except Exception as exc:
            return 0, f"{type(exc).__name__} reading the answer: {exc}"[:500], False
        finally:
            response.release()
        return status, (None if 200 <= status < 300 else f"HTTP {status}"), True

    def close(self) -> None:
        self.client.close()
