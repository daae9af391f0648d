"""The results file's schema: its tables as SQL, the migrations between versions, and the checks a file
from elsewhere passes before anything reads it.

A results file is data, never code: it is shared between labs, and DuckDB stores views, macros and generated
columns in the file, which would run on whoever opens it. `connect` opens every file with external access
(local files, the network), extension installing and loading off and that configuration locked; `check_file`
refuses a file that defines views, macros, generated columns, check constraints or types of its own, or whose
tables are not base tables with this schema's column types, and says which object or column. No torch here.
"""

from __future__ import annotations

from typing import Any

import duckdb

from engine.data.errors import StoreError

# DuckDB's configuration for every connection: nothing in a file reaches past the file.
SAFE_CONFIG: dict[str, Any] = {
    "enable_external_access": False,  # no read_text/read_csv/ATTACH/COPY of local files or URLs
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
    "lock_configuration": True,  # a statement cannot SET them back
}


def connect(path: str, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(path, read_only=read_only, config=dict(SAFE_CONFIG))


SCHEMA_VERSION = 7

SOURCES = ("measured", "predicted", "paper-table1", "paper-table4")

# Version 1: the first schema. Each later version is the SQL in MIGRATIONS that takes a file up to it;
# a new file is made by running version 1 and then every migration, so each migration is always run.
_SCHEMA_V1 = """
CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE runs (
    run_id VARCHAR PRIMARY KEY,
    source VARCHAR NOT NULL,
    host VARCHAR,
    device_kind VARCHAR,
    gpu_name VARCHAR,
    gpu_count INTEGER,
    num_nodes INTEGER,
    driver VARCHAR,
    cuda VARCHAR,
    versions VARCHAR,
    topology VARCHAR,
    command VARCHAR,
    started_at TIMESTAMP,
    ended_at TIMESTAMP,
    status VARCHAR,
    note VARCHAR
);
CREATE TABLE trials (
    trial_id VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    key VARCHAR,
    model VARCHAR NOT NULL,
    gpu VARCHAR NOT NULL,
    num_gpus INTEGER NOT NULL,
    num_nodes INTEGER NOT NULL DEFAULT 1,
    free_lunch BOOLEAN,
    compile BOOLEAN,
    tf32 BOOLEAN,
    attention VARCHAR,
    activation_checkpointing BOOLEAN,
    sharding VARCHAR,
    offloading BOOLEAN,
    micro_batch INTEGER,
    grad_accum INTEGER,
    pass_s DOUBLE,
    update_s DOUBLE,
    step_s DOUBLE,
    days DOUBLE,
    samples_per_s DOUBLE,
    tokens_per_s DOUBLE,
    mfu DOUBLE,
    analytic_days DOUBLE,
    feasible BOOLEAN NOT NULL,
    failure_kind VARCHAR,
    failure_message VARCHAR,
    source VARCHAR NOT NULL,
    config_source VARCHAR,
    plausibility VARCHAR,
    provenance VARCHAR,
    created_at TIMESTAMP
);
CREATE TABLE presets (
    run_id VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,
    id VARCHAR NOT NULL,
    content VARCHAR NOT NULL,
    file VARCHAR
);
CREATE TABLE gpu_prices (gpu VARCHAR, usd DOUBLE, date DATE, source VARCHAR);
CREATE TABLE model_flops (model VARCHAR, training_flops DOUBLE, source VARCHAR);
CREATE TABLE machine_costs (num_gpus INTEGER, kind VARCHAR, cost_usd DOUBLE, source VARCHAR);
"""

# Version 2: what the engine measures beyond version 1's columns (spread of repeated timings, warm-up
# and compile time kept apart, peak memory, the attention/SSM kernel that actually ran).
MIGRATIONS: dict[int, str] = {
    2: """
    ALTER TABLE trials ADD COLUMN pass_spread_s DOUBLE;
    ALTER TABLE trials ADD COLUMN update_spread_s DOUBLE;
    ALTER TABLE trials ADD COLUMN repetitions INTEGER;
    ALTER TABLE trials ADD COLUMN warmup_s DOUBLE;
    ALTER TABLE trials ADD COLUMN compile_s DOUBLE;
    ALTER TABLE trials ADD COLUMN peak_memory_gb DOUBLE;
    ALTER TABLE trials ADD COLUMN kernel VARCHAR;
    ALTER TABLE trials ADD COLUMN duration_s DOUBLE;
    """,
    # Version 3: predictions (engine/predict/) carry what they were predicted from, an error band from
    # the leave-one-out validation, and the memory model's need at the chosen micro-batch.
    3: """
    ALTER TABLE trials ADD COLUMN basis VARCHAR;
    ALTER TABLE trials ADD COLUMN days_low DOUBLE;
    ALTER TABLE trials ADD COLUMN days_high DOUBLE;
    ALTER TABLE trials ADD COLUMN memory_need_gb DOUBLE;
    """,
    # Version 4: the training run a row answers for (engine/data/runs.py): what sets a step's time
    # ("512x2048 bf16 adamw") and the steps its days are for. An older file's rows get their model's run:
    # from the presets stored with their sweep, else from the shipped presets (Store._fill_training_runs).
    4: """
    ALTER TABLE trials ADD COLUMN training_run VARCHAR;
    ALTER TABLE trials ADD COLUMN steps BIGINT;
    """,
    # Version 5: what a search cost (engine/bench/guide.py): how it chose what to measure ('guided',
    # 'exhaustive', or 'pruned' for the dominance-only search before guidance), its wall time, and the
    # trials it ran and left unrun. An older file's measured runs get them from their own rows and times.
    5: """
    ALTER TABLE runs ADD COLUMN search VARCHAR;
    ALTER TABLE runs ADD COLUMN wall_s DOUBLE;
    ALTER TABLE runs ADD COLUMN trials_run INTEGER;
    ALTER TABLE runs ADD COLUMN trials_skipped INTEGER;
    """,
    # Version 6: how a multi-GPU row's GPUs reached each other (engine/data/links.py): nvlink, pcie,
    # host-staged (no peer access), sockets or network between nodes. Older rows get it from their provenance,
    # else from their run's `nvidia-smi topo -m` (Store.fill_interconnect).
    6: """
    ALTER TABLE trials ADD COLUMN interconnect VARCHAR;
    """,
    # Version 7: the methods beyond the paper's (engine/data/space.py, issue 42): liger-kernel's fused kernels
    # and torchao's float8 training; and what a method does to the loss, measured (JSON: the short training
    # run's final losses and largest gap, against bf16 free-lunch from the same initialisation). Older rows
    # used neither (NULL reads as false).
    7: """
    ALTER TABLE trials ADD COLUMN fused BOOLEAN;
    ALTER TABLE trials ADD COLUMN fp8 BOOLEAN;
    ALTER TABLE trials ADD COLUMN numerics VARCHAR;
    """,
}

# An older file's measured runs: the search they ran (their command says), the time between start and end,
# and their trials launched (a duration) against those recorded without a launch (pruned or skipped).
_FILL_SEARCH_COST = """
UPDATE runs SET
    search = CASE WHEN command LIKE '%--exhaustive%' THEN 'exhaustive' ELSE 'pruned' END,
    wall_s = CASE WHEN started_at IS NOT NULL AND ended_at IS NOT NULL
                  THEN epoch(ended_at) - epoch(started_at) END,
    trials_run = (SELECT count(*) FROM trials t WHERE t.run_id = runs.run_id AND coalesce(t.duration_s, 0) > 0),
    trials_skipped = (SELECT count(*) FROM trials t WHERE t.run_id = runs.run_id AND coalesce(t.duration_s, 0) = 0)
WHERE source = 'measured' AND search IS NULL
"""


TABLES = ("meta", "runs", "trials", "presets", "gpu_prices", "model_flops", "machine_costs")


def _expected_columns() -> dict[str, dict[str, str]]:
    """table -> column -> DuckDB type, as this version creates them: read off the schema's own SQL above
    (version 1's CREATE TABLEs, then each migration's ADD COLUMN), in the type names DuckDB reports."""
    out: dict[str, dict[str, str]] = {}
    table = None
    for line in _SCHEMA_V1.splitlines():
        words = line.strip().rstrip(",;").split()
        if words[:2] == ["CREATE", "TABLE"]:
            table = words[2].split("(")[0]
            out[table] = {}
            inline = line.split("(", 1)[1].rstrip(");").split(",") if line.rstrip().endswith(");") else []
            for part in inline:
                name, kind = part.split()[:2]
                out[table][name] = kind
        elif table and len(words) >= 2 and words[0] != ")" and words[0].isidentifier():
            out[table][words[0]] = words[1]
    for target in range(2, SCHEMA_VERSION + 1):
        for table, column, kind in _added_columns(target):
            out[table][column] = kind
    return out


def _added_columns(target: int) -> list[tuple[str, str, str]]:
    """(table, column, type) of each ADD COLUMN in the migration to version `target`."""
    out = []
    for line in MIGRATIONS[target].splitlines():
        words = line.replace(";", " ").split()
        if words[:2] == ["ALTER", "TABLE"] and "COLUMN" in words:
            i = words.index("COLUMN")
            out.append((words[2], words[i + 1], words[i + 2]))
    return out


EXPECTED_COLUMNS = _expected_columns()


def create_current(con: duckdb.DuckDBPyConnection) -> None:
    """This version's tables, empty, with their columns and types and no constraints: the in-memory copy a
    file from elsewhere is read into (engine/data/store.py)."""
    for table, columns in EXPECTED_COLUMNS.items():
        con.execute(f"CREATE TABLE {table} ({', '.join(f'{c} {k}' for c, k in columns.items())})")


def check_code_free(con: duckdb.DuckDBPyConnection, where: str) -> None:
    """Refuse a file that stores anything that would run when read: views, macros (which can shadow a
    built-in function a query calls), generated columns, check constraints, its own types or sequences."""
    found: list[str] = []
    for (name,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary").fetchall():
        found.append(f"view {name!r}")
    # Every function a file defines is a macro, and none is internal: one narrow scan of the function list
    # (the widest query here: every built-in is listed), its kinds read only for what it found.
    if con.execute("SELECT function_name FROM duckdb_functions() WHERE NOT internal LIMIT 1").fetchall():
        for name, kind in con.execute(
                "SELECT DISTINCT function_name, function_type FROM duckdb_functions() WHERE NOT internal").fetchall():
            found.append(f"{kind.replace('_', ' ')} {name!r}")
    for (name,) in con.execute("SELECT type_name FROM duckdb_types() WHERE NOT internal "
                               "AND database_name NOT IN ('system', 'temp')").fetchall():
        found.append(f"type {name!r}")
    for (name,) in con.execute("SELECT sequence_name FROM duckdb_sequences() WHERE NOT temporary").fetchall():
        found.append(f"sequence {name!r}")
    for (table,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT temporary "
                                "AND check_constraint_count > 0").fetchall():
        found.append(f"check constraint on table {table!r}")
    for table, column in con.execute("SELECT table_name, column_name FROM duckdb_columns() WHERE is_generated "
                                     "AND database_name NOT IN ('system', 'temp')").fetchall():
        found.append(f"generated column {table}.{column}")
    if found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise StoreError(f"{where}: refused: the file stores SQL that would run when it is read ({shown}); a "
                         "results file holds tables only. Ask whoever sent it for a plain export "
                         "(`tui-planner results --format json`), or rebuild it from one")


def check_tables(con: duckdb.DuckDBPyConnection, where: str, version: int) -> None:
    """Every table this schema reads is a base table with its columns of this schema's types (a file at an
    older version has fewer columns: those its migrations add are not asked for)."""
    kinds = {(t, c): k for t, c, k in con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE database_name NOT IN "
        "('system', 'temp') AND schema_name = 'main'").fetchall()}
    base = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT temporary "
                                      "AND schema_name = 'main'").fetchall()}
    added = _columns_added_after(version)
    for table, columns in EXPECTED_COLUMNS.items():
        if table not in base:
            if table in ("runs", "trials", "meta"):
                raise StoreError(f"{where}: not a tui-planner database (no {table} table)")
            continue  # an older tool's file without a reference table: read as empty
        for column, kind in columns.items():
            have = kinds.get((table, column))
            if have is None:
                if (table, column) in added:
                    continue
                raise StoreError(f"{where}: column {table}.{column} is missing; the file is not one tui-planner "
                                 "wrote, or it was altered")
            if have != kind:
                raise StoreError(f"{where}: column {table}.{column} is {have}, not {kind}; the file is not one "
                                 "tui-planner wrote, or it was altered")


def _columns_added_after(version: int) -> set[tuple[str, str]]:
    return {(t, c) for target in MIGRATIONS if target > version for t, c, _ in _added_columns(target)}
