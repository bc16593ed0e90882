"""Time units, defined once: every instant and duration in the records is integer nanoseconds
(docs/design.md §3), and these are the factors that turn them into what people read. Standard
library only (nothing at all, in fact), like the rest of the floor."""

from __future__ import annotations

NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000
NS_PER_US = 1_000
MS_PER_S = 1_000
