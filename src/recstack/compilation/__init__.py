"""torch.compile from a config kept apart from model code: apply it, observe it, compare it with eager.

* :mod:`.config`: the compile-config YAML (``defaults:`` and ``rules:``) and which modules it selects;
* :mod:`.regional`: compile the selected modules in place (stage boundaries stay outside);
* :mod:`.observe`: graphs, graph breaks (file:line), recompiles (guards), fallbacks, compile phases;
* :mod:`.compare`: eager vs compiled per stage on identical inputs, and numerical agreement;
* :mod:`.coldwarm`: cold and warm compile time in fresh processes;
* :mod:`.recommend`: search configs within a time budget and write the best as YAML.
"""
