"""Event payloads (pure): exactly `size_bytes` of JSON that carries the event id.

The id leads the payload so a receiver can find it with a prefix match when intermediaries have
dropped the headers. The padding is random letters (as in 2019), drawn once per run, so payloads
are not trivially compressible by a system under test.
"""

from __future__ import annotations

import random
import string

from contract.records import PAYLOAD_ID_PREFIX

_MIDDLE = b'","pad":"'
_END = b'"}'
_OVERHEAD = len(PAYLOAD_ID_PREFIX) + len(_MIDDLE) + len(_END)


class PayloadBuilder:
    def __init__(self, size_bytes: int, longest_id: int, seed: int | None = None) -> None:
        smallest = _OVERHEAD + longest_id
        if size_bytes < smallest:
            raise ValueError(
                f"payload of {size_bytes} bytes cannot carry an event id: use at least {smallest}"
            )
        self.size_bytes = size_bytes
        letters = string.ascii_letters.encode()
        rng = random.Random(seed)
        self._pad = bytes(rng.choice(letters) for _ in range(size_bytes))
        self.prefix = PAYLOAD_ID_PREFIX
        self._tails: dict[int, bytes] = {}

    def tail(self, id_bytes: int) -> bytes:
        """Everything after the id, for an id of this length: the sender's hot path writes
        `prefix + id + tail` without building the payload on its own."""
        tail = self._tails.get(id_bytes)
        if tail is None:
            pad = self._pad[: self.size_bytes - _OVERHEAD - id_bytes]
            tail = self._tails[id_bytes] = _MIDDLE + pad + _END
        return tail

    def build(self, event_id: str) -> bytes:
        encoded = event_id.encode()
        return PAYLOAD_ID_PREFIX + encoded + self.tail(len(encoded))
