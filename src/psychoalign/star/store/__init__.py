"""The STAR lab's persistent state and its pipeline operations.

:class:`StarStore` states the contract (claims and leases, quotas, ordering, what survives a
crash, which errors are raised); :class:`SQLStarStore` keeps it on SQLite or PostgreSQL and
:class:`InMemoryStarStore` in memory. One contract test holds both to it.
"""

from .base import CampaignClosedError, CampaignSettings, ClaimError, StarStore
from .memory import InMemoryStarStore
from .rules import arbitration_needed
from .sql import SQLStarStore

__all__ = [
    "CampaignClosedError",
    "CampaignSettings",
    "ClaimError",
    "InMemoryStarStore",
    "SQLStarStore",
    "StarStore",
    "arbitration_needed",
]
