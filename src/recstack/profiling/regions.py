"""The :class:`Regions` protocol: code outside the module tree timed as a stage of its own, in both passes.

Its own module so that implementations (:mod:`recstack.profiling.methods`,
:mod:`recstack.distributed.comm_regions`) and the passes that install them import it without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from torch import nn


class Regions(Protocol):
    """Code outside the module tree that is a stage of its own (TorchRec's collectives run inside the
    embedding module: :mod:`recstack.distributed.comm_regions`). ``install`` makes every entry into such
    code call ``enter(stage)`` and its exit ``leave()``, and returns the function that undoes it; the
    timing pass times these stages like the stage roots', the op pass opens a stage range for each, so
    both passes see the same stages and each is apportioned against its own measured time. The returned
    function must stop the marks; an implementation may keep its patches in place between installs
    (marks passing through) and remove them when its owner is done with it."""

    def install(self, model: nn.Module, enter: Callable[[str], None], leave: Callable[[], None]
                ) -> Callable[[], None]: ...
