"""Fact-check chain: search, fetch, judge and aggregate evidence for a statement."""
