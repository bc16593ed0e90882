"""Locust's fastest stock user posting 8 KB binary CloudEvents: what a user would pick instead.

Run by `benchmarks/sender_rate.py` (`locust -f benchmarks/locust_post.py --headless ...`) against
the same receiver as evbench's sender. `EVBENCH_LOCUST_RATE` is each user's constant throughput
(requests/s); 0 means as fast as the user can go (closed loop), which gives Locust's best rate.
"""

from __future__ import annotations

import itertools
import os

from locust import FastHttpUser, constant, constant_throughput, task

_RATE = float(os.environ.get("EVBENCH_LOCUST_RATE", "0"))
_PAD = b"x" * 8192
_ids = itertools.count()


class CloudEventPoster(FastHttpUser):
    wait_time = constant_throughput(_RATE) if _RATE > 0 else constant(0)

    @task
    def post(self) -> None:
        eid = f"locust-{next(_ids)}"
        prefix = b'{"evbenchid":"' + eid.encode() + b'","pad":"'
        body = prefix + _PAD[: 8192 - len(prefix) - 2] + b'"}'
        self.client.post(
            "/",
            data=body,
            headers={
                "ce-specversion": "1.0",
                "ce-id": eid,
                "ce-source": "locust",
                "ce-type": "dev.evbench.measure",
                "content-type": "application/json",
            },
        )
