"""Timestamping CloudEvents receivers and their record writer."""
