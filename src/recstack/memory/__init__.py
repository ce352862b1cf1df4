"""Memory: predicted bytes from a config alone, measured bytes of a real step, embedding-cache sizing.

* :mod:`recstack.zoo.footprint.predict`: tables, optimizer state, gradients, activations per stage, inputs and
  all-to-all buffers per rank, from a model config and run options (nothing allocated);
* :mod:`recstack.memory.search`: the largest batch and table scale that fit a limit;
* :mod:`recstack.memory.measure`: the same figures measured on a real step (allocator events);
* :mod:`recstack.memory.cache`: miss-ratio curves of an embedding cache (LRU, LFU; set-associative).

See docs/memory.md.
"""
