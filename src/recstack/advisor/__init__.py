"""``recstack advise``: measured what-ifs for each bottleneck, ranked, combined and applied (docs/advise.md).

:mod:`.levers` lists the candidate levers a profile's stages suggest (and those not tried, with the reason),
:mod:`.measure` times each what-if against the baseline in alternating rounds in one process and judges it
with the project's noise rule, :mod:`.combine` measures the non-conflicting winners together, and
:mod:`.commands` is the CLI and :func:`recstack.advisor.advise.advise` the API (``recstack.advise``).
"""

