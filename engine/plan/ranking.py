"""Purchase ranking and the what-if cost model, as SQL over the store.

"I have $X and need this model trained within D days: what do I buy?" Every option is a GPU type x count x
a system that is sold to hold them (presets/systems.toml: an SXM GPU only on its HGX baseboard, a card only
where its form factor, width, cooling and power fit); a GPU and count no system takes is listed with why
(status 'no-system') and never ranked. Each option carries one honest figure: measured first, then
predicted (engine/predict/, with its band and basis; `capped` where the prediction is held at its GPU
generation's plausible MFU), then a paper row only where its implied MFU is plausible; the paper's Table 1 figure for the cell is carried beside (paper_days, paper_mfu) whatever the
cell is ranked on. Hardware cost = the system without GPUs + GPUs x price, each price dated (stale after 12
months); cost per experiment = hardware x days / lifespan (the paper's 5-year amortisation by default) +
energy (the GPUs' TDP x utilisation + the system's base power, x its room's PUE, at the presets' default
electricity price unless given); renting at the cheapest dated cloud price; budget and deadline checks (the
deadline against the band: engine/plan/uncertainty.py); the Pareto frontier of cost against days.

`sources == ("paper",)` is the paper's own view: its Table 1/4 rows, implausible ones ranked with their
flags (an impossible one is refused, as everywhere), its 2024 prices and machines (Tables 5-7), and no
energy unless a price is given, as the paper computed it.

The options are computed from the presets in Python; one query does the rest. No torch here.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any

from engine.data.errors import PlannerError
from engine.data.presets import Presets, is_stale
from engine.data.runs import rows_on_run, run_key
from engine.data.store import TRIAL_COLUMNS, Store, Trial
from engine.plan import uncertainty

# A cell whose only figures are faster than the GPU's peak ("impossible") has status 'refused': it is
# not ranked, and not called infeasible either.
SOURCE_GROUPS = {"measured": ("measured",), "paper": ("paper-table1", "paper-table4"), "predicted": ("predicted",)}
PRIORITY = ("measured", "predicted", "paper")  # which figure a cell is ranked on when it has several
OVERRIDE_SOURCE = "your price (override)"
MAX_NODES = 64  # machines in one run the planner plans (its network term is a ring across them)


@dataclass(frozen=True)
class RankRequest:
    model: str
    budget_usd: float
    deadline_days: float | None = None
    gpus_allowed: tuple[str, ...] = ()  # empty: every GPU with a price
    max_gpus: int = 8
    lifespan_years: float = 5.0  # the paper's amortisation period
    kwh_price_usd: float | None = None  # None: the presets' default electricity price (the paper's view: none)
    utilisation: float = 1.0  # share of TDP drawn while training, for the energy cost
    price_overrides: dict[str, float] = field(default_factory=dict)  # GPU or system id -> USD
    sources: tuple[str, ...] = ("measured", "predicted", "paper")
    today: dt.date | None = None  # for staleness; None: today
    steps: int | None = None  # the run's length; None: the model preset's (engine/data/runs.py)
    nodes: int = 1  # machines of up to max_gpus GPUs each, one run over all of them
    network: str | None = None  # the network preset between them (nodes > 1)

    @property
    def paper_view(self) -> bool:
        """The paper's own view: only its rows, its prices, its machines."""
        return tuple(self.sources) == ("paper",)

    def on(self) -> dt.date:
        return self.today or dt.date.today()

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
        if self.steps is not None and not (isinstance(self.steps, int) and 1 <= self.steps <= 10**9):
            raise PlannerError(f"a run is 1 to 10^9 steps, not {self.steps}")
        if self.max_gpus < 1:
            raise PlannerError(f"max GPUs per machine must be at least 1, not {self.max_gpus}")
        if not (isinstance(self.nodes, int) and 1 <= self.nodes <= MAX_NODES):
            raise PlannerError(f"machines in one run are 1 to {MAX_NODES}, not {self.nodes}")
        if self.nodes > 1 and self.paper_view:
            raise PlannerError("the paper's view has single machines only: leave out --nodes or --source paper")
        if self.nodes > 1 and self.network is None:
            raise PlannerError(f"{self.nodes} machines need a network between them: --network, one of "
                               f"{', '.join(presets.networks) or '(no network presets)'}")
        if self.network is not None:
            presets.network(self.network)
            if self.nodes == 1:
                raise PlannerError(f"a network ({self.network}) joins several machines: give the number of machines "
                                   "(--nodes N), or leave the network out for one machine")
        if self.nodes > 1:
            batch = presets.model(self.model).training.batch_size
            if not any(batch % (n * self.nodes) == 0 for n in range(1, self.max_gpus + 1)):
                raise PlannerError(f"{self.nodes} machines of 1 to {self.max_gpus} GPUs cannot split {self.model}'s "
                                   f"batch of {batch:,} sequences evenly: choose another number of machines")
        if self.nodes > 1 and "predicted" not in self.sources:
            raise PlannerError("several machines are predicted only (nothing is measured over a network): "
                               "--source must include predicted")
        for item, usd in self.price_overrides.items():
            if item not in presets.systems:
                presets.gpu(item)  # names the GPUs known when it is neither
            if not (usd > 0 and math.isfinite(usd)):
                raise PlannerError(f"price of {item} must be a positive amount, not {usd}")
        for gpu in self.gpus_allowed:
            presets.gpu(gpu)
        unknown = [s for s in self.sources if s not in SOURCE_GROUPS]
        if unknown or not self.sources:
            raise PlannerError(f"sources are some of {', '.join(SOURCE_GROUPS)}, not {', '.join(unknown) or 'none'}")


def energy_price(req: RankRequest, presets: Presets) -> tuple[float | None, dt.date | None, str]:
    """The electricity price in use, its date and where it comes from."""
    if req.kwh_price_usd is not None:
        return req.kwh_price_usd, None, "the price given"
    if req.paper_view:
        return None, None, "the paper's view leaves it out"
    e = presets.electricity
    if e is None:
        return None, None, "no [electricity] preset"
    return e.usd_per_kwh, e.date, e.source


RANK_SQL = """
WITH scaled AS (  -- the model's rows on this run: a step's time holds for any length, days scale with steps
    SELECT * REPLACE (days * coalesce($steps / steps, 1.0) AS days, days_low * coalesce($steps / steps, 1.0) AS days_low,
                      days_high * coalesce($steps / steps, 1.0) AS days_high)
    FROM trials WHERE model = $model AND (training_run IS NULL OR training_run = $run)
      -- rows measured as another machine (no peer access, nodes over sockets) are not this machine's cell;
      -- several machines are ranked on rows of that many over the network asked for
      AND num_nodes = $nodes
      AND CASE WHEN $nodes = 1 THEN interconnect IS NULL OR interconnect IN ('nvlink', 'pcie')
               ELSE interconnect = $network END
),
cells AS (
    SELECT t.*, s.grp, s.priority,
           row_number() OVER (PARTITION BY t.gpu, t.num_gpus * t.num_nodes
                              ORDER BY s.priority, t.days, t.created_at) AS pick
    FROM scaled t JOIN rank_sources s ON t.source = s.source
    WHERE t.model = $model AND t.feasible AND t.days IS NOT NULL AND t.plausibility IS DISTINCT FROM 'impossible'
      -- a paper figure the tool calls implausible is never what a cell is ranked on (but in the paper's view)
      AND (s.grp <> 'paper' OR $paper_view OR coalesce(t.plausibility, 'ok') = 'ok')
),
best AS (SELECT * FROM cells WHERE pick = 1),
tried AS (  -- every cell with any row, to tell "infeasible everywhere" from "refused" and "no data"
    SELECT t.gpu, t.num_gpus * t.num_nodes AS n,
           bool_or((t.feasible AND t.days IS NOT NULL AND t.plausibility IS NOT DISTINCT FROM 'impossible')
                   OR t.failure_kind = 'refused') AS refused_any,
           bool_or(s.grp = 'paper' AND t.feasible AND t.days IS NOT NULL
                   AND t.plausibility = 'implausible') AS implausible_any
    FROM scaled t JOIN rank_sources s ON t.source = s.source
    WHERE t.model = $model GROUP BY ALL
),
paper AS (  -- the paper's Table 1 figure for the cell, carried beside whatever the cell is ranked on
    SELECT gpu, num_gpus * num_nodes AS n, min(days) AS paper_days, arg_min(mfu, days) AS paper_mfu,
           arg_min(plausibility, days) AS paper_plausibility
    FROM scaled WHERE $with_paper AND model = $model AND source = 'paper-table1' AND feasible AND days IS NOT NULL
    GROUP BY ALL
),
options AS (
    SELECT o.gpu, tr.n AS num_gpus, o.system, o.hardware_cost_usd, o.tdp_w, o.base_power_w, o.pue,
           o.cloud_usd_per_gpu_hour,
           b.days, b.source, b.grp, b.trial_id, b.mfu, b.plausibility, b.free_lunch, b.activation_checkpointing,
           b.sharding, b.offloading, b.fused, b.fp8, b.micro_batch, b.grad_accum, b.days_low, b.days_high, b.basis,
           p.paper_days, p.paper_mfu, p.paper_plausibility,
           -- a prediction held at its GPU generation's plausible MFU (engine/predict/predictor.py): a limit, not
           -- an estimate; its provenance says so (a shared file's may be anything: not JSON reads as not capped)
           coalesce(b.source = 'predicted' AND CASE WHEN json_valid(b.provenance)
               THEN json_extract_string(b.provenance, '$.predicted.capped') = 'true' END, false) AS capped,
           -- the calibrated interval's parts (engine/predict/intervals.py): what a measurement could narrow
           CASE WHEN b.source = 'predicted' AND json_valid(b.provenance)
                THEN json_extract_string(b.provenance, '$.predicted.interval_parts') END AS interval_parts,
           CASE WHEN b.source = 'predicted' AND json_valid(b.provenance)
                THEN json_extract_string(b.provenance, '$.predicted.kind') END AS kind,
           -- how far the floor lifts its pass, and whether the floor was seen on this GPU (intervals.FLOOR_LIFT)
           CASE WHEN b.source = 'predicted' AND json_valid(b.provenance)
                THEN TRY_CAST(json_extract_string(b.provenance, '$.predicted.floor_lift') AS DOUBLE) END AS floor_lift,
           CASE WHEN b.source = 'predicted' AND json_valid(b.provenance)
                THEN json_extract_string(b.provenance, '$.predicted.floor_elsewhere') = 'true' END AS floor_elsewhere,
           CASE WHEN o.system IS NULL THEN 'no-system' WHEN b.days IS NOT NULL THEN 'ok'
                WHEN tr.refused_any THEN 'refused' WHEN tr.implausible_any THEN 'implausible'
                ELSE 'infeasible' END AS status
    FROM tried tr JOIN rank_options o ON o.gpu = tr.gpu AND o.num_gpus = tr.n
    LEFT JOIN best b ON b.gpu = tr.gpu AND b.num_gpus * b.num_nodes = tr.n
    LEFT JOIN paper p ON p.gpu = tr.gpu AND p.n = tr.n
),
costed AS (
    SELECT *,
           CASE WHEN $kwh IS NULL OR days IS NULL OR system IS NULL THEN 0
                ELSE (tdp_w * num_gpus * $utilisation + base_power_w) * pue / 1000.0 * 24 * days * $kwh
           END AS energy_usd
    FROM options
),
ranked AS (
    SELECT *, hardware_cost_usd * days / ($lifespan_years * 365.0) + energy_usd AS cost_per_experiment_usd,
           cloud_usd_per_gpu_hour * num_gpus * 24 * days AS rent_usd,
           coalesce(hardware_cost_usd <= $budget, false) AS within_budget,
           days IS NOT NULL AND ($deadline IS NULL OR days <= $deadline) AS within_deadline
    FROM costed
)
SELECT r.*, days IS NOT NULL AND system IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM ranked o WHERE o.days IS NOT NULL AND o.system IS NOT NULL
             AND o.hardware_cost_usd <= r.hardware_cost_usd AND o.days <= r.days
             AND (o.hardware_cost_usd < r.hardware_cost_usd OR o.days < r.days)) AS pareto
FROM ranked r
ORDER BY within_budget DESC, system IS NULL, days IS NULL, days, hardware_cost_usd, gpu, num_gpus
"""


def _price(usd: float, date: dt.date | None, source: str, today: dt.date) -> dict[str, Any]:
    return {"usd": usd, "date": date, "source": source, "stale": date is not None and is_stale(date, today)}


def options(req: RankRequest, presets: Presets) -> dict[tuple[str, int], dict[str, Any]]:
    """Every GPU type x count the request allows, with the system it goes in (the cheapest that takes it)
    and its dated prices, or why no system takes it."""
    today = req.on()
    allowed = set(req.gpus_allowed) or set(presets.gpus)
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for g in presets.gpus.values():
        if g.id not in allowed:
            continue
        if g.id in req.price_overrides:
            gp = _price(req.price_overrides[g.id], today, OVERRIDE_SOURCE, today)
        else:
            p = (g.paper_price or g.price) if req.paper_view else g.price
            if p is None:
                continue
            gp = _price(p.usd, p.date, p.source, today)
        cloud = sorted((c for c in presets.cloud if c.gpu == g.id), key=lambda c: (c.usd_per_gpu_hour, c.provider))
        rent = cloud[0] if cloud else None
        for n in range(1, req.max_gpus + 1):
            o: dict[str, Any] = {"gpu": g.id, "num_gpus": n, "tdp_w": g.tdp_w, "gpu_price": gp, "system": None,
                                 "system_name": None, "system_short": None, "system_kind": None, "system_price": None,
                                 "why": None, "base_power_w": 0.0, "pue": 1.0,
                                 "rent": None if rent is None else {
                                     "usd_per_gpu_hour": rent.usd_per_gpu_hour, "provider": rent.provider,
                                     "date": rent.date, "source": rent.source, "stale": is_stale(rent.date, today)}}
            if req.paper_view:
                m = presets.machine_for(n)
                if m is None:
                    o["why"] = f"the paper's machines hold at most {max(presets.machines, default=0)} GPUs"
                else:
                    table = "Table 6" if "Table 6" in m.source else "Table 7" if "Table 7" in m.source else "machines"
                    o.update(system=f"paper-{m.num_gpus}", system_name=f"the paper's {m.num_gpus}-GPU {m.kind}",
                             system_short=("T6" if table == "Table 6" else "T7" if table == "Table 7" else "pap"),
                             system_kind="paper", system_price=_price(m.cost_usd, m.date, m.source, today))
            else:
                fits = presets.systems_for(g.id, n)
                if not fits:
                    o["why"] = presets.why_no_system(g.id, n)
                else:
                    def base(s):
                        return req.price_overrides.get(s.id, s.price.usd)

                    s = min(fits, key=lambda s: (base(s), s.id))
                    sp = (_price(req.price_overrides[s.id], today, OVERRIDE_SOURCE, today) if s.id in req.price_overrides
                          else _price(s.price.usd, s.price.date, s.price.source, today))
                    o.update(system=s.id, system_name=s.name, system_short=s.short, system_kind=s.kind,
                             system_price=sp, base_power_w=s.base_power_w, pue=s.pue)
            k = req.nodes  # machines: k of this one, the run over all their GPUs
            if k > 1:
                o.update(num_gpus=k * n, base_power_w=o["base_power_w"] * k, nodes=k, per_node=n)
                if o["system"] is not None:
                    o["system_one"] = o["system_name"]  # one machine, as its price is quoted
                    o["system_name"] = f"{k} x {o['system_name']} over {presets.network(req.network).name}"
            if o["system"] is not None:
                o["hardware_cost_usd"] = k * (o["system_price"]["usd"] + n * gp["usd"])
                dates = [p["date"] for p in (gp, o["system_price"]) if p["date"] is not None]
                o["price_date"] = min(dates) if dates else None
                o["price_stale"] = gp["stale"] or o["system_price"]["stale"]
            else:
                o["hardware_cost_usd"], o["price_date"], o["price_stale"] = None, gp["date"], gp["stale"]
            out[(g.id, o["num_gpus"])] = o
    return out


def _input_tables(store: Store, req: RankRequest, opts: dict[tuple[str, int], dict[str, Any]]) -> None:
    """The options and the trusted sources as temporary tables, each from one statement of column lists
    (DuckDB binds a list in one go; a row or a parameter at a time costs ~10x more)."""
    options = [(o["gpu"], o["num_gpus"], o["system"], o["hardware_cost_usd"], o["tdp_w"], o["base_power_w"], o["pue"],
                o["rent"]["usd_per_gpu_hour"] if o["rent"] else None) for o in opts.values()]
    order = [g for g in PRIORITY if g in req.sources]
    sources = [(src, grp, order.index(grp)) for grp in order for src in SOURCE_GROUPS[grp]]
    for name, columns, data in (
        ("rank_options", (("gpu", "VARCHAR"), ("num_gpus", "INTEGER"), ("system", "VARCHAR"),
                          ("hardware_cost_usd", "DOUBLE"), ("tdp_w", "DOUBLE"), ("base_power_w", "DOUBLE"),
                          ("pue", "DOUBLE"), ("cloud_usd_per_gpu_hour", "DOUBLE")), options),
        ("rank_sources", (("source", "VARCHAR"), ("grp", "VARCHAR"), ("priority", "INTEGER")), sources),
    ):
        lists = [list(c) for c in zip(*data)] if data else [[] for _ in columns]
        select = ", ".join(f"unnest(?::{kind}[]) AS {col}" for col, kind in columns)
        store.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT {select}", lists)


def measured_gpus(store: Store) -> list[str]:
    return [r["gpu"] for r in store.query(
        "SELECT DISTINCT gpu FROM trials WHERE source = 'measured' AND feasible AND days IS NOT NULL")]


def rank(store: Store, req: RankRequest, presets: Presets) -> list[dict[str, Any]]:
    """Every option for the model, best first among those within budget (see RANK_SQL); the GPU types and
    counts no system takes follow, with why (status 'no-system')."""
    req.validate(presets)
    opts = options(req, presets)
    _input_tables(store, req, opts)
    kwh, kwh_date, kwh_source = energy_price(req, presets)
    model = presets.model(req.model)
    params = {"model": req.model, "steps": req.steps or model.training.steps, "run": run_key(model), "kwh": kwh,
              "utilisation": req.utilisation, "lifespan_years": req.lifespan_years,
              "budget": req.budget_usd, "deadline": req.deadline_days, "paper_view": req.paper_view,
              "with_paper": "paper" in req.sources, "nodes": req.nodes, "network": req.network}
    rows = store.query_named(RANK_SQL, params)
    measured = uncertainty.measured_generations(measured_gpus(store), presets)
    from engine.predict import intervals as calibrated

    widths = calibrated.load()
    cells = uncertainty.measured_arch_cells(
        ((r["model"], r["gpu"], r["n"]) for r in store.query(
            "SELECT DISTINCT model, gpu, num_gpus * num_nodes AS n FROM trials "
            "WHERE source = 'measured' AND feasible AND days IS NOT NULL")), presets) if widths is not None else frozenset()
    for r in rows:
        o = opts[(r["gpu"], r["num_gpus"])]
        gp, sp, rent = o["gpu_price"], o["system_price"], o["rent"]
        r.update(
            system_name=o["system_name"], system_one=o.get("system_one") or o["system_name"],
            system_short=o["system_short"], system_kind=o["system_kind"], why=o["why"],
            gpu_price_usd=gp["usd"], gpu_price_date=gp["date"], gpu_price_source=gp["source"], gpu_price_stale=gp["stale"],
            system_price_usd=sp and sp["usd"], system_price_date=sp and sp["date"],
            system_price_source=sp and sp["source"], system_price_stale=bool(sp and sp["stale"]),
            price_date=o["price_date"], price_stale=o["price_stale"],
            rent_provider=rent and rent["provider"], rent_date=rent and rent["date"],
            rent_source=rent and rent["source"], rent_stale=bool(rent and rent["stale"]),
            kwh_price_usd=kwh, kwh_date=kwh_date, kwh_source=kwh_source,
            lifespan_years=req.lifespan_years,
        )
        low, high = uncertainty.band(r)
        r["days_low"], r["days_high"] = low, high
        r["deadline_verdict"] = uncertainty.deadline_verdict(low, high, req.deadline_days)
        r["extrapolated"] = uncertainty.extrapolated(r, presets, measured)
        r["narrow"] = uncertainty.narrowing(r, req.model, presets, cells, widths) if r["days"] is not None else None
        r["config"] = _config(r)
        if r["rent_usd"] is None or r["days"] is None:
            r["buy_or_rent"] = None
        elif r["system"] is None:
            r["buy_or_rent"] = "rent"  # no system sells it this way: renting is the only way
        else:
            r["buy_or_rent"] = "rent" if r["rent_usd"] < r["cost_per_experiment_usd"] else "buy"
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
    if r.get("fused"):
        parts.append("fused kernels")
    if r.get("fp8"):  # a cell's best may be an fp8 row (opt-in: only where one is stored); it never hides that
        parts.append("fp8 (changes numerics)")
    if r["micro_batch"] and r["grad_accum"]:
        parts.append(f"micro-batch {r['micro_batch']} x {r['grad_accum']}")
    return ", ".join(parts)


def store_for(store: Store, presets: Presets, model_id: str, nodes: int = 1, network: str | None = None) -> Store:
    """The store to rank `model_id` on. When the store holds no row of the model on its run (a model from its
    config.json, a run with another step: batch, sequence, precision or optimizer), an in-memory copy of the
    store's measured and paper rows with the model's predictions added (engine/predict/, every GPU preset x
    1, 2, 4, 8 GPUs); else the store itself (a model it knows is ranked on its rows: `predict --write` adds
    predictions to a database of your own). Several machines (nodes > 1) over a network: always such a
    copy, predicted for 1 to 8 GPUs a machine over that network (nothing is measured there). The caller
    closes what it gets if it is not the store it gave."""
    model = presets.model(model_id)
    run = run_key(model)
    have = store.query("SELECT count(*) AS n FROM trials WHERE model = ? AND "
                       "(training_run IS NULL OR training_run = ?)", [model_id, run])[0]["n"]
    if have and nodes == 1:
        return store
    from engine.predict import build_predictor, predict_missing, write_predictions

    rows = store.query("SELECT * FROM trials WHERE source <> 'predicted'")
    memory = Store.open(None)
    keep = rows_on_run(rows, model)
    memory.add_trials([Trial(**{k: r.get(k) for k in TRIAL_COLUMNS}) for r in keep])
    predictor = build_predictor(keep, presets, for_model=model_id)
    if nodes > 1:
        preds = predict_missing(predictor, presets, models=[model_id], best_only=True, counts=range(1, 9),
                                nodes=nodes, network=presets.network(network))
    else:
        preds = predict_missing(predictor, presets, models=[model_id], best_only=True)
    write_predictions(memory, preds, presets, command=f"rank (predicted for {model_id} as asked"
                                                      + (f", {nodes} machines over {network})" if nodes > 1 else ")"))
    return memory
