"""The boundary study (Experiment 5) and H1 as cells of the experiment harness.

Each negotiated request is one cell of the harness's result store: (system, benchmark, item),
where the system is a negotiating configuration (one ``psychoalign`` system per repeat, each with
its own sampling seed) and the benchmark is the corpus (``boundary``) or the rated items (``h1``).
So the study resumes after a kill without negotiating a finished request again, shards across
runners sharing one store, and carries the run's identity (models, parameters, data) like every
other run. :func:`outcomes_from_cells` turns the stored cells back into the per-repeat outcomes
the analyses read (:func:`.run.boundary_report`, :func:`.h1.analyze_h1`), so the numbers are the
ones the negotiations gave, however many processes produced them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ....errors import InputError
from ....models import Message
from ....negotiation import PAPER_PROTOCOL
from ....traces.tension import DEFAULT_DEFINITION
from ...harness.benchmark import Benchmark, Item, Metric, Respond, ScoredItem
from ...harness.judging import Judges
from ...harness.spec import ExperimentSpec
from ...harness.store import CellResult
from .corpus import CorpusItem, load_corpus
from .negotiate import ItemOutcome

__all__ = ["outcomes_from_cells", "study_spec"]

#: Spec ``n`` of a study: every item of the corpus (its own options choose a subset).
ALL_ITEMS = 100_000


class BoundaryOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    corpus: str = Field("boundary", description="Corpus file (YAML/JSON/JSONL/CSV) or built-in name.")
    per_domain: int | None = Field(None, ge=1, description="Requests per domain (default: all).")


class H1Options(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ratings: str = Field(min_length=1, description="A multi-rater file the STAR analysis reads.")
    format: str | None = None
    mapping: str | None = Field(None, description="YAML column mapping (as `star analyze --mapping`).")
    n: int | None = Field(None, ge=3, description="A seeded random sample of N items (default: all).")
    seed: int = 0


def corpus_items(items: Sequence[CorpusItem]) -> list[Item]:
    """The harness items of a corpus: the request as the one turn, labels and context as data."""
    return [
        Item(
            id=i.id,
            turns=(i.request,),
            data={"domain": i.domain, "category": i.category, "context": i.context},
        )
        for i in items
    ]


class _Negotiated(Benchmark):
    """A list of requests, each negotiated once by the system; the cell keeps every tension
    definition's value, the final state and defense, and the trace id. The system must be a
    negotiation (it reports ``tensions``); anything else fails the cell with the reason."""

    metrics = (Metric("tension", f"Mean tension T ({DEFAULT_DEFINITION.value})", binary=False, higher_is_better=False),)
    primary = "tension"

    def sample(self, items: list[Item], n: int, seed: int) -> list[Item]:
        return items  # a study runs its whole item list, in order (its options choose the subset)

    async def run(self, item: Item, respond: Respond, judges: Judges) -> ScoredItem:
        context = str(item.data.get("context") or "")
        messages = [Message(role="system", content=context)] if context else []
        reply = await respond([*messages, Message(role="user", content=item.turns[0])])
        tensions = reply.details.get("tensions")
        if not isinstance(tensions, dict):
            raise InputError(
                f"{self.name}: the system gave no tension (it is not a negotiation)",
                hint="run the study with systems of kind psychoalign",
            )
        t = tensions.get(DEFAULT_DEFINITION.value)
        details = {
            "domain": item.data["domain"],
            "category": item.data["category"],
            "tensions": tensions,
            "state": reply.details.get("state"),
            "defense": reply.details.get("defense"),
            "rounds": int(reply.details.get("rounds") or 0),
        }
        return ScoredItem.from_replies(
            reply,
            metrics={"tension": float(t)} if t is not None else {},
            details=details,
        )


class BoundaryCorpus(_Negotiated):
    name = "boundary"
    title = "Alignment boundary corpus"
    source = "a labelled corpus of requests (domain x category), negotiated once per repeat (docs/boundary.md)"
    options_model = BoundaryOptions
    opts: BoundaryOptions

    def load(self, data_dir: Path) -> list[Item]:
        return corpus_items(load_corpus(self.opts.corpus).subset(self.opts.per_domain).items)


class H1Items(_Negotiated):
    name = "h1"
    title = "H1: rated items"
    source = "the items of a multi-rater file, negotiated once each (docs/boundary.md, H1)"
    options_model = H1Options
    opts: H1Options

    def load(self, data_dir: Path) -> list[Item]:
        from .h1 import h1_corpus, load_h1_dataset

        mapping = None
        if self.opts.mapping is not None:
            from ....star.analysis.data import load_mapping, mapping_from

            mapping = mapping_from(load_mapping(Path(self.opts.mapping)))
        dataset = load_h1_dataset(
            self.opts.ratings, self.opts.format, limit=self.opts.n, seed=self.opts.seed, mapping=mapping
        )
        return corpus_items(h1_corpus(dataset))


def study_spec(
    name: str,
    benchmark: dict[str, Any],
    *,
    repeats: Sequence[dict[str, dict[str, Any]]],
    negotiation: dict[str, Any],
    framework: str,
    concurrency: int,
) -> ExperimentSpec:
    """The study as a harness spec: one ``psychoalign`` system per repeat (``repeats``: each one's
    role overrides, e.g. its sampling seed), every one on the same item list. The study measures
    tension under the paper's protocol, so the DRIVE always proposes (``decide_on_request`` off) and
    only the EVALUATOR's classification selects the defense (``crisis_screen`` off)."""
    systems = [
        {
            "name": f"run-{r}",
            "kind": "psychoalign",
            "framework": framework,
            "roles": roles,
            "negotiation": {**negotiation, **PAPER_PROTOCOL},
        }
        for r, roles in enumerate(repeats)
    ]
    return ExperimentSpec.model_validate(
        {
            "name": name,
            "description": f"the {benchmark['name']} study, one system per repeat",
            "systems": systems,
            "benchmarks": [benchmark],
            "n": ALL_ITEMS,
            "concurrency": concurrency,
            "baseline": "run-0",
            "judge": {"refusal": "rules", "harm": "off", "calibration_n": 0},
        }
    )


def outcomes_from_cells(
    spec: ExperimentSpec, items: Sequence[CorpusItem], cells: Sequence[CellResult]
) -> list[list[ItemOutcome]]:
    """Per repeat (the spec's systems, in order), one outcome per item in the items' order: a done
    cell's tensions and trace; a failed cell as a failed negotiation with its reason; a cell no
    runner has finished yet (another shard) as failed, "not run yet"."""
    bench = spec.benchmarks[0].name
    by = {(c.system, c.item_id): c for c in cells if c.benchmark == bench}
    runs: list[list[ItemOutcome]] = []
    for r, system in enumerate(spec.systems):
        run: list[ItemOutcome] = []
        for item in items:
            cell = by.get((system.name, item.id))
            base: dict[str, Any] = {
                "id": item.id,
                "domain": item.domain,
                "category": item.category,
                "request": item.request,
            }
            if cell is not None and cell.status == "done":
                d = cell.details
                run.append(
                    ItemOutcome(
                        **base,
                        trace_id=cell.trace_ids[0] if cell.trace_ids else None,
                        status="completed",
                        tensions=dict(d.get("tensions") or {}),
                        state=d.get("state"),
                        defense=d.get("defense"),
                        rounds=int(d.get("rounds") or 0),
                        repeat=r,
                    )
                )
            else:
                run.append(
                    ItemOutcome(
                        **base,
                        trace_id=cell.trace_ids[0] if cell is not None and cell.trace_ids else None,
                        status="failed",
                        error=(cell.error if cell is not None and cell.status != "running" else None)
                        or "not run yet (another runner holds it, or the run was stopped)",
                        repeat=r,
                    )
                )
        runs.append(run)
    return runs


def register(registry: Any) -> None:
    """The studies' item lists as benchmarks (``experiment run`` specs can name them too)."""
    registry.add_benchmark(BoundaryCorpus)
    registry.add_benchmark(H1Items)
