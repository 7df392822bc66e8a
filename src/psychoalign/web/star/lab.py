"""The services the lab pages share (:class:`StarLab`): the STAR stores, the lab store, the
accounts and the red-teaming targets.

The state lives in :mod:`psychoalign.star.store` (the research data) and
:mod:`psychoalign.star.lab_store` (what only the platform needs); the pages reach both through
their interfaces.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ...a2a import remote_transport
from ...config import Settings
from ...errors import InputError, PsychoAlignError
from ...models import build_model
from ...negotiation.engine import Negotiator
from ...star.campaign import TargetConfig
from ...star.lab_store import LabCampaignSettings, LabStore, SQLLabStore, lab_export_rows
from ...star.model import Turn
from ...star.personas import ModelTarget, PsychoAlignTarget, Target
from ...star.policy import Policy, load_policy
from ...star.store import SQLStarStore, StarStore
from ..accounts import AccountStore, SQLAccountStore


class StarLab:
    """The services the lab pages share: one STAR store per policy (a campaign may upload its
    own policy), the lab store, and the red-teaming targets (built once per campaign)."""

    def __init__(
        self, settings: Settings, url: str, *, negotiator: Negotiator | None = None, **engine_kwargs: Any
    ) -> None:
        self.settings = settings
        self.negotiator = negotiator
        self._own_negotiator: Negotiator | None = None
        self.url = url
        self.engine_kwargs = engine_kwargs
        store = SQLStarStore(url, load_policy(), **engine_kwargs)
        self.store: StarStore = store
        self.lab: LabStore = SQLLabStore(store.engine)  # one database: the lab's tables beside the store's
        self.accounts: AccountStore = SQLAccountStore(engine=store.engine)
        self._stores: dict[str, StarStore] = {store.policy.sha256: store}
        self._targets: dict[str, Target] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._campaigns: dict[str, LabCampaignSettings] = {}
        self.jobs: dict[str, asyncio.Task[dict[str, int]]] = {}  # campaign -> persona run
        self._policies: dict[str, Policy] = {}
        # results panel and analysis report per campaign, with the data version they were made from
        self.results_cache: dict[str, tuple[str, dict[str, Any]]] = {}
        self.report_cache: dict[str, tuple[str, str]] = {}

    async def init(self) -> None:
        await self.store.init()
        await self.lab.init()

    def job_status(self, campaign: str) -> str | None:
        """The last persona run of a campaign, for the lead: running, its counts, or its error."""
        job = self.jobs.get(campaign)
        if job is None:
            return None
        if not job.done():
            return "LLM personas are working on the shortfall…"
        if job.cancelled():
            return "the persona run was cancelled"
        error = job.exception()
        if error is not None:
            return f"the persona run stopped: {getattr(error, 'message', None) or type(error).__name__}"
        counts = job.result()
        annotations, arbitrations = counts.get("annotate", 0), counts.get("arbitrate", 0)
        return f"LLM personas completed {annotations} annotations and {arbitrations} arbitrations"

    async def close(self) -> None:
        for job in self.jobs.values():
            job.cancel()
        if self._own_negotiator is not None:
            await self._own_negotiator.aclose()
        for target in self._targets.values():
            model = getattr(target, "model", None)
            if model is not None:
                await model.aclose()
        await self.accounts.close()
        for store in self._stores.values():
            await store.close()

    async def campaign(self, name: str) -> LabCampaignSettings:
        """A campaign's settings (immutable once created, so cached)."""
        if name not in self._campaigns:
            found = await self.lab.campaign(name)
            if found is None:
                raise InputError(await self.not_found(name))
            self._campaigns[name] = found
        return self._campaigns[name]

    async def not_found(self, name: str) -> str:
        """Why the lab cannot open campaign ``name``: none by that name, or one the store has
        without the lab's settings (a campaign made by the Python API, or by ``psychoalign star
        campaign run`` before it recorded its campaigns for the lab), with how to open it."""
        if len(name) <= 64 and await self.store.has_campaign(name):
            return f"campaign '{name}' is in this store but the lab has no settings for it: {OPEN_IN_LAB}"
        return no_campaign(name)

    async def unopened(self, known: Sequence[LabCampaignSettings]) -> list[str]:
        """The campaigns in the store the lab has no settings for (``known``: the ones it has)."""
        return sorted(set(await self.store.campaigns()) - {c.name for c in known})

    async def policy(self, name: str) -> Policy:
        """A campaign's parsed policy (parsed once: YAML parsing costs more than a page)."""
        if name not in self._policies:
            self._policies[name] = (await self.campaign(name)).policy()
        return self._policies[name]

    async def store_for(self, campaign: str) -> StarStore:
        """The STAR store that applies ``campaign``'s policy (matching on its rules)."""
        try:
            policy = await self.policy(campaign)
        except InputError:
            policy = self.store.policy
        if policy.sha256 not in self._stores:
            self._stores[policy.sha256] = SQLStarStore(self.url, policy, **self.engine_kwargs)
        return self._stores[policy.sha256]

    def target(self, campaign: LabCampaignSettings) -> Target:
        """The model red teamers talk to: a configured model role, or PsychoAlign itself.
        :class:`InputError` in one line when it cannot be built (a scripted role without replies
        or rules, a missing package or key): the launch check and the task pages report that."""
        if campaign.name not in self._targets:
            config = campaign.target
            try:
                if config.kind == "psychoalign":
                    if self.negotiator is None:
                        self.negotiator = self._own_negotiator = Negotiator(
                            self.settings, transport=remote_transport(self.settings)
                        )
                    self._targets[campaign.name] = PsychoAlignTarget(self.negotiator, config.framework)
                else:
                    model = build_model(self.settings.model_spec(config.role), cache_dir=self.settings.cache_dir())
                    self._targets[campaign.name] = ModelTarget(model)
            except PsychoAlignError as exc:
                raise InputError(f"the target ({_target_name(config)}) cannot be built: {exc.message}") from None
            except (ValueError, KeyError, TypeError, OSError) as exc:  # a malformed script or settings
                raise InputError(
                    f"the target ({_target_name(config)}) cannot be built: {type(exc).__name__}: {exc}"
                ) from None
        return self._targets[campaign.name]

    async def export_rows(self, name: str) -> AsyncIterator[dict[str, Any]]:
        """The campaign's export rows with the lab's columns (:func:`lab_export_rows`: the same
        columns ``psychoalign star export`` writes)."""
        async for row in lab_export_rows(await self.store_for(name), self.lab, name):
            yield row

    def lock(self, key: str) -> asyncio.Lock:
        """One turn at a time per dialogue (a double click must not interleave turns)."""
        return self._locks.setdefault(key, asyncio.Lock())

    async def reply(self, campaign: LabCampaignSettings, turns: Sequence[Turn]) -> Turn:
        return await self.target(campaign).reply(list(turns))


#: How a campaign in the store that the lab has no settings for is opened in the lab.
OPEN_IN_LAB = (
    "run `psychoalign star campaign run FILE` once more with its campaign file and this store "
    "to open it here (the run records it for the lab, then resumes where it stopped)"
)


def no_campaign(name: str) -> str:
    """The 404 message: a name from the URL, cut to the longest a campaign may have (64)."""
    return f"no campaign '{name[:64]}{'…' if len(name) > 64 else ''}'"


def _target_name(config: TargetConfig) -> str:
    if config.kind == "psychoalign":
        return f"PsychoAlign, framework '{config.framework}'"
    return f"model role '{config.role}'"


def rows_json(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows)
