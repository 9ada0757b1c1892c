"""Adapters for external agent benchmarks (paper 000 §6.4, Appendix C).

An adapter runs another benchmark's tasks through this project's gateway and policies and
writes its traces in our contract (``trace/schema.py``), so our metrics, statistics and frozen
tables apply unchanged. ``agentdojo`` is the one built (optional extra ``agentdojo``).
"""
