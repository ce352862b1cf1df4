"""Serving under a latency target: open-loop load, a pool of worker processes, tail latency.

``recstack serve MODEL --qps Q --duration S`` (:mod:`recstack.serving.commands`)
plans requests (:mod:`~recstack.serving.plan`: arrivals from
:mod:`~recstack.serving.arrivals`, query sizes from the workload, split into
batches), starts worker processes (:mod:`~recstack.serving.worker`), dispatches
the batches at their scheduled times (:mod:`~recstack.serving.loadgen`) and
summarises the latencies in HDR histograms (:mod:`~recstack.serving.summary`).
``--search`` (:mod:`~recstack.serving.search`) finds the highest QPS that meets
a p99 target, per configuration; probes are stored by :mod:`~recstack.serving.results`.
"""

QUERY_SIZE_MAX = 1 << 20  # candidates in one query (and --max-batch): beyond, a plan's arrays outgrow memory
MAX_WORKERS = 1024  # worker processes of one serve, whatever the model: beyond, the host runs out of processes
