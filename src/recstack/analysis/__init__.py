"""Analyses over a Profile (functions that annotate a profile's nodes; they never measure or draw).

:mod:`recstack.analysis.pipeline`: ``analyse(profile, machine, steps)`` runs the
named analysis steps (``counters``, ``roofline``, ``findings``); the runner calls
it after collecting, ``recstack analyse`` on a saved profile.
:mod:`recstack.analysis.roofline`: ``classify(profile, machine)`` adds achieved
FLOP/s and bytes/s, the roofline ceiling and a bound class to every node.
"""
