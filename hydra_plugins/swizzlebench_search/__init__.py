"""Hydra plugin: the swizzle search sweeper (``hydra/sweeper=swizzle_search``).

Hydra only instantiates plugins defined under the ``hydra_plugins`` namespace package, so
this module holds the class Hydra sees and the config node it selects; the search itself
is :mod:`harness.search.sweeper`.
"""
from hydra.core.config_store import ConfigStore

from harness.search.sweeper import SearchSweeper, SearchSweeperConf


class SwizzleSearchSweeper(SearchSweeper):
    """Hydra's handle on :class:`harness.search.sweeper.SearchSweeper`."""


ConfigStore.instance().store(group="hydra/sweeper", name="swizzle_search", node=SearchSweeperConf,
                             provider="swizzlebench")
