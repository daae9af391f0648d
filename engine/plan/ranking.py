"""Purchase ranking and the what-if cost model, as SQL over the store.

"I have $X and need this model trained within D days: what do I buy?" For each hardware option (GPU type
x count) the best feasible result the trusted sources hold (measured wins over paper, paper over
predicted; the row says which), its hardware cost (GPUs x price + the base system for that count), the
cost of one experiment over the hardware's lifespan (plus energy where a power price is set), renting
instead where a cloud price exists, budget and deadline checks, and the Pareto frontier of cost against
days. A predicted row (engine/predict/) carries its error band (days_low-days_high) and basis through.
The inputs go into small temporary tables; one query does the rest. No torch here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from engine.data.errors import PlannerError
from engine.data.presets import Presets
from engine.data.store import Store

# A cell whose only figures are faster than the GPU's peak ("impossible") has status 'refused': it is
# not ranked, and not called infeasible either.
SOURCE_GROUPS = {"measured": ("measured",), "paper": ("paper-table1", "paper-table4"), "predicted": ("predicted",)}
PRIORITY = ("measured", "paper", "predicted")


@dataclass(frozen=True)
class RankRequest:
    model: str
    budget_usd: float
    deadline_days: float | None = None
    gpus_allowed: tuple[str, ...] = ()  # empty: every GPU with a price
    max_gpus: int = 8
    lifespan_years: float = 5.0  # the paper's amortisation period
    kwh_price_usd: float | None = None
    utilisation: float = 1.0  # share of TDP drawn while training, for the energy cost
    price_overrides: dict[str, float] = field(default_factory=dict)
    sources: tuple[str, ...] = PRIORITY

    def validate(self, presets: Presets) -> None:
        presets.model(self.model)
        if not (self.budget_usd > 0 and math.isfinite(self.budget_usd)):
            raise PlannerError(f"budget must be a positive amount of USD, not {self.budget_usd}")
        if self.deadline_days is not None and not (self.deadline_days > 0 and math.isfinite(self.deadline_days)):
            raise PlannerError(f"deadline must be a positive number of days, not {self.deadline_days}")
        if not (self.lifespan_years > 0 and math.isfinite(self.lifespan_years)):
            raise PlannerError(f"hardware lifespan must be a positive number of years, not {self.lifespan_years}")
        if self.kwh_price_usd is not None and not (self.kwh_price_usd >= 0 and math.isfinite(self.kwh_price_usd)):
            raise PlannerError(f"electricity price must be a finite amount, at least 0, not {self.kwh_price_usd} USD/kWh")
        if not 0 < self.utilisation <= 1:
            raise PlannerError(f"utilisation is a share of TDP in (0, 1], not {self.utilisation}")
        if self.max_gpus < 1:
            raise PlannerError(f"max GPUs per machine must be at least 1, not {self.max_gpus}")
        for gpu, usd in self.price_overrides.items():
            presets.gpu(gpu)
            if not (usd > 0 and math.isfinite(usd)):
                raise PlannerError(f"price of {gpu} must be a positive amount, not {usd}")
        for gpu in self.gpus_allowed:
            presets.gpu(gpu)
        unknown = [s for s in self.sources if s not in SOURCE_GROUPS]
        if unknown or not self.sources:
            raise PlannerError(f"sources are some of {', '.join(SOURCE_GROUPS)}, not {', '.join(unknown) or 'none'}")


RANK_SQL = """
WITH cells AS (
    SELECT t.*, s.grp, s.priority,
           row_number() OVER (PARTITION BY t.gpu, t.num_gpus * t.num_nodes
                              ORDER BY s.priority, t.days, t.created_at) AS pick
    FROM trials t JOIN rank_sources s ON t.source = s.source
    WHERE t.model = $model AND t.feasible AND t.days IS NOT NULL AND t.plausibility IS DISTINCT FROM 'impossible'
),
best AS (SELECT * FROM cells WHERE pick = 1),
tried AS (  -- every cell with any row, to tell "infeasible everywhere" from "refused" and "no data"
    SELECT t.gpu, t.num_gpus * t.num_nodes AS n,
           bool_or((t.feasible AND t.days IS NOT NULL AND t.plausibility IS NOT DISTINCT FROM 'impossible')
                   OR t.failure_kind = 'refused') AS refused_any
    FROM trials t JOIN rank_sources s ON t.source = s.source
    WHERE t.model = $model GROUP BY ALL
),
options AS (
    SELECT p.gpu, tr.n AS num_gpus, p.usd AS gpu_price_usd,
           (SELECT m.cost_usd FROM rank_machines m WHERE m.num_gpus >= tr.n ORDER BY m.num_gpus LIMIT 1) AS system_usd,
           b.days, b.source, b.grp, b.trial_id, b.mfu, b.plausibility, b.free_lunch, b.activation_checkpointing,
           b.sharding, b.offloading, b.micro_batch, b.grad_accum, b.days_low, b.days_high, b.basis,
           p.tdp_w, p.cloud_usd_per_gpu_hour,
           CASE WHEN b.days IS NOT NULL THEN 'ok' WHEN tr.refused_any THEN 'refused' ELSE 'infeasible' END AS status
    FROM tried tr JOIN rank_gpus p ON p.gpu = tr.gpu
    LEFT JOIN best b ON b.gpu = tr.gpu AND b.num_gpus * b.num_nodes = tr.n
    WHERE tr.n <= $max_gpus
),
costed AS (
    SELECT *, num_gpus * gpu_price_usd + system_usd AS hardware_cost_usd,
           CASE WHEN $kwh IS NULL OR days IS NULL THEN 0
                ELSE tdp_w * num_gpus * $utilisation / 1000.0 * 24 * days * $kwh END AS energy_usd
    FROM options WHERE system_usd IS NOT NULL
),
ranked AS (
    SELECT *, hardware_cost_usd * days / ($lifespan_years * 365.0) + energy_usd AS cost_per_experiment_usd,
           cloud_usd_per_gpu_hour * num_gpus * 24 * days AS rent_usd,
           hardware_cost_usd <= $budget AS within_budget,
           days IS NOT NULL AND ($deadline IS NULL OR days <= $deadline) AS within_deadline
    FROM costed
)
SELECT r.*, days IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM ranked o WHERE o.days IS NOT NULL
             AND o.hardware_cost_usd <= r.hardware_cost_usd AND o.days <= r.days
             AND (o.hardware_cost_usd < r.hardware_cost_usd OR o.days < r.days)) AS pareto
FROM ranked r
ORDER BY within_budget DESC, days IS NULL, days, hardware_cost_usd
"""


def _input_tables(store: Store, req: RankRequest, presets: Presets) -> None:
    con = store.con
    allowed = set(req.gpus_allowed) or set(presets.gpus)
    gpus = []
    for g in presets.gpus.values():
        price = req.price_overrides.get(g.id, g.price.usd if g.price else None)
        if g.id in allowed and price is not None:
            cloud = [c.usd_per_gpu_hour for c in presets.cloud if c.gpu == g.id]
            gpus.append((g.id, float(price), g.tdp_w, min(cloud) if cloud else None))
    sources = [(src, grp, PRIORITY.index(grp)) for grp in req.sources for src in SOURCE_GROUPS[grp]]
    machines = [(m.num_gpus, m.cost_usd) for m in presets.machines.values()]
    for name, ddl, rows in (
        ("rank_gpus", "gpu VARCHAR, usd DOUBLE, tdp_w DOUBLE, cloud_usd_per_gpu_hour DOUBLE", gpus),
        ("rank_sources", "source VARCHAR, grp VARCHAR, priority INTEGER", sources),
        ("rank_machines", "num_gpus INTEGER, cost_usd DOUBLE", machines),
    ):
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} ({ddl})")
        if rows:
            con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' for _ in rows[0])})", rows)


def rank(store: Store, req: RankRequest, presets: Presets) -> list[dict[str, Any]]:
    """Every hardware option for the model, best first among those within budget (see RANK_SQL)."""
    req.validate(presets)
    _input_tables(store, req, presets)
    params = {"model": req.model, "max_gpus": req.max_gpus, "kwh": req.kwh_price_usd, "utilisation": req.utilisation,
              "lifespan_years": req.lifespan_years, "budget": req.budget_usd, "deadline": req.deadline_days}
    rows = store.query_named(RANK_SQL, params)
    for r in rows:
        r["config"] = _config(r)
        r["buy_or_rent"] = None if r["rent_usd"] is None else ("rent" if r["rent_usd"] < r["cost_per_experiment_usd"] else "buy")
    return rows


def no_data_gpus(store: Store, req: RankRequest, presets: Presets) -> list[str]:
    """GPU types allowed and priced that the trusted sources hold no row for, for this model."""
    sources = [src for grp in req.sources for src in SOURCE_GROUPS[grp]]
    seen = {r["gpu"] for r in store.query(
        "SELECT DISTINCT gpu FROM trials WHERE model = ? AND source IN (SELECT unnest(?))", [req.model, sources])}
    allowed = req.gpus_allowed or tuple(presets.gpus)
    priced = {g for g in allowed if g in req.price_overrides or presets.gpus[g].price}
    return [g for g in allowed if g in priced and g not in seen]


def _config(r: dict[str, Any]) -> str | None:
    if r.get("days") is None:
        return None
    parts = ["free-lunch" if r["free_lunch"] else "naive"]
    if r["activation_checkpointing"]:
        parts.append("checkpointing")
    if r["sharding"] and r["sharding"] != "none":
        parts.append(r["sharding"])
    if r["offloading"]:
        parts.append("offload")
    if r["micro_batch"] and r["grad_accum"]:
        parts.append(f"micro-batch {r['micro_batch']} x {r['grad_accum']}")
    return ", ".join(parts)
