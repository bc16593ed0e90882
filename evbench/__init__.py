"""evbench: open-loop load tests and latency analysis for event-delivery systems."""
