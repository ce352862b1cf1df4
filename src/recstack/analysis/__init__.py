"""Analyses over a Profile tree (pure functions that annotate nodes; they never measure).

:mod:`recstack.analysis.roofline`: ``classify(profile, machine)`` adds achieved
FLOP/s and bytes/s, the roofline ceiling and a bound class to every node.
"""
