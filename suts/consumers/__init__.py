"""Kafka consumers whose memory `evbench memory` measures, each in a process of its own."""
