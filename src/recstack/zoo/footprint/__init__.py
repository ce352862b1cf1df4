"""A zoo model's memory footprint from its config alone (nothing allocated): the one model behind the build's
preflight (:mod:`recstack.zoo.memory`) and ``recstack memory`` (:mod:`recstack.memory`).

* :mod:`.predict`: tables, optimizer state, gradients, activations per stage, inputs, per rank;
* :mod:`.activations`: what each architecture's stages hold and save for backward;
* :mod:`.stages`: which stage a model's top-level child belongs to.
"""
