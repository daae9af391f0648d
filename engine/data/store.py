"""The DuckDB store: every trial is a row, written the moment it finishes; rankings are SQL over it.

One process writes (the sweep's parent, never a trial process). Shipped databases open read-only. The
schema carries a version: an older file is migrated when opened for writing; a newer one, or a file
that is not ours, is refused with a message that says so.

A results file is data, never code (engine/data/schema.py): every connection has DuckDB's external access and
extension loading off, and a file that stores views, macros or other SQL, or columns of other types, is
refused. A file opened read-only that is not the shipped one (a colleague's, say) is read once into memory,
each row's figures recomputed from its own timings and shape (engine/data/trust.py), and every query runs on
that copy. No torch here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

import duckdb

from engine.data import schema
from engine.data.errors import StoreError
from engine.data.paths import is_shipped
from engine.data.schema import (_FILL_SEARCH_COST, _SCHEMA_V1, MIGRATIONS, SCHEMA_VERSION,  # noqa: F401 (re-exported)
                                SOURCES)

# The longest one read of a file from elsewhere may take (s): a file of millions of rows is refused, not waited on.
READ_BOUND_S = float(os.environ.get("TUI_PLANNER_READ_BOUND_S", "60"))

@dataclass
class Trial:
    """One row of `trials`: one combination of settings for one model on one hardware cell."""

    model: str
    gpu: str
    num_gpus: int
    feasible: bool
    source: str
    run_id: str = ""
    trial_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    key: str | None = None
    num_nodes: int = 1
    free_lunch: bool | None = None
    compile: bool | None = None
    tf32: bool | None = None
    attention: str | None = None
    activation_checkpointing: bool | None = None
    sharding: str | None = None
    offloading: bool | None = None
    micro_batch: int | None = None
    grad_accum: int | None = None
    pass_s: float | None = None
    update_s: float | None = None
    step_s: float | None = None
    days: float | None = None
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    mfu: float | None = None
    analytic_days: float | None = None
    failure_kind: str | None = None
    failure_message: str | None = None
    config_source: str | None = None
    plausibility: str | None = None
    provenance: str | None = None
    created_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).replace(tzinfo=None))
    pass_spread_s: float | None = None
    update_spread_s: float | None = None
    repetitions: int | None = None
    warmup_s: float | None = None
    compile_s: float | None = None
    peak_memory_gb: float | None = None
    kernel: str | None = None
    duration_s: float | None = None
    basis: str | None = None  # predicted rows: the rows and fit they come from
    days_low: float | None = None  # predicted rows: the error band from leave-one-out validation
    days_high: float | None = None
    memory_need_gb: float | None = None  # the memory model's need at micro_batch (predicted, or a skip)
    training_run: str | None = None  # what sets the step's time: "512x2048 bf16 adamw" (engine/data/runs.py)
    steps: int | None = None  # the run's steps, which `days` is for
    interconnect: str | None = None  # several GPUs: how they reached each other (engine/data/links.py; schema v6)
    fused: bool | None = None  # liger-kernel's kernels (engine/data/space.py; schema v7)
    fp8: bool | None = None  # torchao float8 training (schema v7)
    numerics: str | None = None  # JSON: the method's loss against bf16 free-lunch, measured (schema v7)


TRIAL_COLUMNS = tuple(f.name for f in dataclasses.fields(Trial))


@dataclass
class Run:
    """One row of `runs`: a sweep (or an import of published figures) and where it happened."""

    source: str
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    host: str | None = None
    device_kind: str | None = None
    gpu_name: str | None = None
    gpu_count: int | None = None
    num_nodes: int | None = None
    driver: str | None = None
    cuda: str | None = None
    versions: str | None = None  # JSON: library -> version
    topology: str | None = None
    command: str | None = None
    started_at: dt.datetime | None = None
    ended_at: dt.datetime | None = None
    status: str | None = None
    note: str | None = None
    search: str | None = None  # guided | exhaustive | pruned (schema v5)
    wall_s: float | None = None  # the search's wall time, start to end
    trials_run: int | None = None  # trials launched
    trials_skipped: int | None = None  # combinations left unrun: cannot win, dominated, memory, resumed, given up


RUN_COLUMNS = tuple(f.name for f in dataclasses.fields(Run))


def evidence_rows(stores: Iterable[Store]) -> list[dict[str, Any]]:
    """The measured and published rows (never predictions) of these stores, each trial once: what the
    predictor, the memory skip and the guided search rest on."""
    rows: dict[str, dict[str, Any]] = {}
    for store in stores:
        for r in store.query("SELECT * FROM trials WHERE source <> 'predicted'"):
            rows.setdefault(r["trial_id"], r)
    return list(rows.values())


def _is_lock_error(e: Exception) -> bool:
    text = str(e).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


class Store:
    """A DuckDB results file. Use `Store.open(path)`; close it (or use `with`) when done."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path | None, read_only: bool):
        self.con, self.path, self.read_only = con, path, read_only

    # --- opening ---------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path | None = None, read_only: bool | None = None, create: bool = True,
             presets: Any = None) -> "Store":
        """Open (or create) a results file. None opens an in-memory store. Shipped files are read-only.
        A file opened read-only that is not the shipped one is read into memory, its rows' figures recomputed
        with `presets` (the models and GPUs the caller reads with; None: the shipped and the user's presets).
        Every way a file can be wrong (missing, a folder, locked by a writer, damaged, not ours, from a newer
        version, a name the file system refuses) is a StoreError naming the file, never a traceback."""
        if path is None:
            store = cls(schema.connect(":memory:"), None, False)
            store._create()
            return store
        path = Path(path).expanduser()
        try:
            if read_only is None:
                read_only = is_shipped(path)
            exists = path.exists()
            if not exists and (read_only or not create):
                raise StoreError(f"{path}: no such database file")
            if exists and path.is_dir():
                raise StoreError(f"{path}: is a directory, not a database file")
            if exists and not path.is_file():  # a FIFO or a device would block or never end
                raise StoreError(f"{path}: not a regular file (a pipe or a device), so not a database file")
            if not exists:
                _create_atomically(path)
        except OSError as e:
            raise StoreError(f"{path}: {e.strerror or e}") from None
        try:
            con = schema.connect(str(path), read_only=read_only)
        except duckdb.Error as e:
            if _is_lock_error(e):
                raise StoreError(
                    f"{path}: another process is writing to this database ({_lock_holder(e)}). "
                    "Wait for its sweep to finish or stop it, or open a copy of the file (each trial is in the "
                    "file itself once written)."
                ) from None
            raise StoreError(f"{path}: cannot open as a DuckDB database ({_first_line(e)})") from None
        store = cls(con, path, read_only)
        try:
            with _bounded(con, path):
                shipped = is_shipped(path)
                seen = _identity(path)
                if not shipped and seen not in _CODE_FREE:  # the shipped file is built with the package
                    schema.check_code_free(con, str(path))
                    if seen is not None and read_only:
                        _CODE_FREE.add(seen)
                store._check_version()
                if read_only and not shipped:
                    store = store._recomputed_copy(presets)
        except duckdb.Error as e:
            con.close()
            raise StoreError(f"{path}: cannot read it; the file may be damaged or cut short ({_first_line(e)})") from None
        except BaseException:
            con.close()
            raise
        return store

    def _recomputed_copy(self, presets: Any = None) -> "Store":
        """This file's tables read into an in-memory store of this schema, each trial's figures recomputed from
        its own timings and shape (engine/data/trust.py); the file is closed. Nothing of the file but its
        base tables' values is read, and every later query runs on the copy."""
        from engine.data import trust
        from engine.data.presets import load_presets

        copy = Store(schema.connect(":memory:"), self.path, True)  # read-only to callers; no checkpoints
        schema.create_current(copy.con)  # this version's tables at once (a new file runs every migration)
        have = {t for (t,) in self.con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT temporary "
                                                "AND schema_name = 'main'").fetchall()}
        if presets is None:
            try:
                presets = load_presets()
            except Exception:  # noqa: BLE001 - broken user presets: the shipped ones still check the rows
                presets = load_presets(include_user=False)
        models = trust.stored_models(self.con.execute(
            "SELECT run_id, id, content FROM presets WHERE kind = 'model'").fetchall()) if "presets" in have else {}
        for table, columns in schema.EXPECTED_COLUMNS.items():
            if table not in have:
                continue
            names = list(columns)
            cur = self.con.execute(f"SELECT {', '.join(names)} FROM {table}")
            rows = cur.fetchall()
            if table == "trials":
                checked = (trust.recheck(dict(zip(names, r)), presets, models) for r in rows)
                rows = [tuple(c[n] for n in names) for c in checked]
            copy.insert(table, names, rows)
        self.con.close()
        return copy

    def cursor(self) -> "Store":
        """The same database for another thread (DuckDB connections are not shared across threads).
        Closing it leaves this store open."""
        return Store(self.con.cursor(), self.path, self.read_only)

    def _create(self) -> None:
        self.con.execute("BEGIN TRANSACTION")
        self.con.execute(_SCHEMA_V1)
        self.con.execute("INSERT INTO meta VALUES ('schema_version', '1'), ('app', 'tui-planner')")
        self._migrate_from(1)
        self.con.execute("COMMIT")

    def _tables(self) -> set[str]:
        return {r[0] for r in self.con.execute("SELECT table_name FROM information_schema.tables").fetchall()}

    def _version(self) -> int | None:
        if "meta" not in self._tables():
            return None
        row = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        try:
            return int(row[0]) if row else None
        except ValueError:
            return None

    def _check_version(self) -> None:
        version = self._version()
        where = self.path or "database"
        if version is None:
            raise StoreError(f"{where}: not a tui-planner database (it has no schema version)")
        if version < 1:
            raise StoreError(f"{where}: schema version {version} is not one tui-planner ever wrote (they start at "
                             "1); the file was altered or is not ours, so it cannot be migrated")
        missing = {"runs", "trials"} - self._tables()
        if missing:
            raise StoreError(f"{where}: not a tui-planner database (no {' or '.join(sorted(missing))} table)")
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{where}: made by a newer tui-planner (schema v{version}); this one reads up to "
                f"v{SCHEMA_VERSION}. Upgrade tui-planner to open it."
            )
        if version < SCHEMA_VERSION:
            if self.read_only:
                raise StoreError(
                    f"{where}: schema v{version} is older than v{SCHEMA_VERSION} and the file is open "
                    f"read-only, so it cannot be migrated. Run `tui-planner db migrate {where}` on a copy."
                )
            schema.check_tables(self.con, str(where), version)
            self.con.execute("BEGIN TRANSACTION")
            self._migrate_from(version)
            self.con.execute("COMMIT")
        schema.check_tables(self.con, str(where), SCHEMA_VERSION)

    def _migrate_from(self, version: int) -> None:
        for target in range(version + 1, SCHEMA_VERSION + 1):
            self.con.execute(MIGRATIONS[target])
        if version < 4 and self.con.execute("SELECT count(*) FROM trials").fetchone()[0]:
            self._fill_training_runs(None)
        if version < 5:
            self.fill_search_cost()
        if version < 6:
            self.fill_interconnect()
        self.con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])

    def fill_search_cost(self) -> None:
        """Give measured runs written before schema v5 (or imported from an older export) what their
        search cost, from their command, times and rows; a run that has it keeps it."""
        self.con.execute(_FILL_SEARCH_COST)

    def fill_interconnect(self) -> None:
        """Give measured multi-GPU rows written before schema v6 (or imported from an older export) their
        interconnect: their provenance's, else their run's `nvidia-smi topo -m` (both NVLink so far)."""
        from engine.data.links import INTERCONNECTS, topology_link

        todo = self.con.execute(
            "SELECT t.trial_id, t.provenance, r.topology FROM trials t LEFT JOIN runs r ON r.run_id = t.run_id "
            "WHERE t.interconnect IS NULL AND t.source = 'measured' AND t.gpu <> 'cpu' "
            "AND t.num_gpus * t.num_nodes > 1").fetchall()
        for trial_id, prov, topology in todo:
            link = provenance_of(prov).get("interconnect")
            if link not in INTERCONNECTS:
                link = topology_link(topology)
            if link:
                self.con.execute("UPDATE trials SET interconnect = ? WHERE trial_id = ?", [link, trial_id])

    def fill_training_runs(self, models: Any = None) -> None:
        """Give rows written without their training run (imported from an older export, or the paper's
        tables) their model's: from the presets stored with their sweep, else from `models` (a mapping of
        model id to Model), else from the shipped presets."""
        self._writable()
        self.con.execute("BEGIN TRANSACTION")
        try:
            self._fill_training_runs(models)
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise

    def _fill_training_runs(self, models: Any) -> None:
        from engine.data.runs import key_of

        todo = self.con.execute("SELECT DISTINCT run_id, model FROM trials WHERE training_run IS NULL").fetchall()
        if not todo:
            return
        stored = {(r, m): c for r, m, c in self.con.execute(
            "SELECT run_id, id, content FROM presets WHERE kind = 'model'").fetchall()}
        if models is None:
            models = {}
        shipped = None
        for run_id, model in todo:
            key = steps = None
            content = stored.get((run_id, model))
            if content is not None:
                try:
                    m = json.loads(content)
                    t = m["training"]
                    key = key_of(t["batch_size"], m.get("seq_len"), m.get("image_size"), t["precision"],
                                 t["optimizer"])
                    steps = int(t["steps"])
                except (ValueError, KeyError, TypeError):
                    key = None
            if key is None:
                m = models.get(model)
                if m is None:
                    if shipped is None:
                        from engine.data.presets import load_presets

                        try:
                            shipped = load_presets(include_user=False).models
                        except Exception:  # noqa: BLE001 - a broken install: leave the rows as they are
                            shipped = {}
                    m = shipped.get(model)
                if m is None:
                    continue  # a model no preset knows: its rows stay without a run (shown as such)
                t = m.training
                key, steps = key_of(t.batch_size, m.seq_len, m.image_size, t.precision, t.optimizer), t.steps
            self.con.execute("UPDATE trials SET training_run = ?, steps = ? WHERE run_id = ? AND model = ? "
                             "AND training_run IS NULL", [key, steps, run_id, model])

    @property
    def schema_version(self) -> int | None:
        return self._version()

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing ---------------------------------------------------------------------------------

    def _writable(self) -> None:
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only (shipped databases are); use --db FILE to write")

    def add_run(self, run: Run) -> str:
        self._writable()
        self.insert("runs", RUN_COLUMNS, [dataclasses.astuple(run)])
        return run.run_id

    def finish_run(self, run_id: str, status: str = "done", wall_s: float | None = None,
                   trials_run: int | None = None, trials_skipped: int | None = None) -> None:
        """Mark a run over; a sweep adds what its search cost (schema v5)."""
        self._writable()
        try:
            self.con.execute(
                "UPDATE runs SET ended_at = ?, status = ?, wall_s = coalesce(?, wall_s), "
                "trials_run = coalesce(?, trials_run), trials_skipped = coalesce(?, trials_skipped) "
                "WHERE run_id = ?",
                [dt.datetime.now(dt.timezone.utc).replace(tzinfo=None), status, wall_s, trials_run,
                 trials_skipped, run_id],
            )
        except duckdb.Error as e:
            raise self._write_error(e) from e
        finally:
            _LIVE_RUNS.discard(run_id)  # over either way: unwritten, it reads (and is marked) interrupted
        self._checkpoint()

    def start_run(self, run: Run) -> str:
        """Add a run this process is about to write trials for. Runs still 'running' from a process that
        died (killed outright, its machine gone) are marked 'interrupted' first: a writer holds the file
        alone, so a 'running' run that is not this process's own is over."""
        self._writable()
        stale = [r for r in self.query("SELECT run_id FROM runs WHERE status = 'running'")
                 if r["run_id"] not in _LIVE_RUNS]
        if stale:
            try:
                self.con.execute("UPDATE runs SET status = 'interrupted' WHERE run_id IN (SELECT unnest(?))",
                                 [[r["run_id"] for r in stale]])
            except duckdb.Error as e:
                raise self._write_error(e) from e
        self.add_run(run)
        _LIVE_RUNS.add(run.run_id)
        return run.run_id

    def set_numerics(self, model: str, fused: bool, fp8: bool, numerics_json: str) -> int:
        """Store what a method does to the loss (engine/bench/numerics.py) on this model's measured rows that
        used exactly these methods beyond the paper's; returns how many rows took it."""
        self._writable()
        where = ("source = 'measured' AND model = ? AND coalesce(fused, false) = ? AND coalesce(fp8, false) = ?")
        try:
            n = self.con.execute(f"SELECT count(*) FROM trials WHERE {where}", [model, fused, fp8]).fetchone()[0]
            self.con.execute(f"UPDATE trials SET numerics = ? WHERE {where}", [numerics_json, model, fused, fp8])
        except duckdb.Error as e:
            raise self._write_error(e) from e
        self._checkpoint()
        return int(n)

    def add_trial(self, trial: Trial) -> str:
        """Write one trial in its own transaction: a killed sweep loses at most the trial in flight."""
        self._writable()
        if trial.source not in SOURCES:
            raise StoreError(f"trial source {trial.source!r} is not one of {', '.join(SOURCES)}")
        self.insert("trials", TRIAL_COLUMNS, [dataclasses.astuple(trial)])
        return trial.trial_id

    def add_trials(self, trials: Sequence[Trial]) -> None:
        self._writable()
        self.insert("trials", TRIAL_COLUMNS, [dataclasses.astuple(t) for t in trials])

    def insert(self, table: str, columns: Sequence[str], rows: Iterable[tuple]) -> None:
        """Insert rows into any table in one transaction."""
        rows = list(rows)
        if not rows:
            return
        marks = ", ".join("?" for _ in columns)
        sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
        try:
            self.con.execute("BEGIN TRANSACTION")
            if len(rows) > 8:  # one statement of column lists: a row at a time costs ~1 ms each in DuckDB
                kinds = dict(self.con.execute(
                    "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? "
                    "AND table_schema = 'main'", [table]).fetchall())
                select = ", ".join(f"unnest(?::{kinds[c]}[])" for c in columns)
                self.con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {select}",
                                 [list(c) for c in zip(*rows)])
            else:
                self.con.executemany(sql, [list(r) for r in rows])
            self.con.execute("COMMIT")
        except BaseException as e:
            try:  # a failed COMMIT has ended the transaction already: its error is the one to report
                self.con.execute("ROLLBACK")
            except duckdb.Error:
                pass
            if isinstance(e, duckdb.Error):
                raise self._write_error(e) from e
            raise
        self._checkpoint()

    def _write_error(self, e: Exception) -> StoreError:
        """What a failed write says: a full disk by name (DuckDB's own words are "database has been invalidated"
        once a checkpoint failed for want of space), and that the rows already in the file are kept."""
        text = str(e)
        where = self.path or "database"
        if "No space left" in text or "ENOSPC" in text:
            return StoreError(f"{where}: the disk is full (No space left on device), so this write did not "
                              "happen; every row written before it is in the file. Free some space and run the "
                              "same command again")
        if "File too large" in text or "EFBIG" in text:
            return StoreError(f"{where}: the file system would not let the file grow (file too large: a quota or "
                              "size limit), so this write did not happen; every row written before it is in the "
                              "file")
        if "invalidated" in text:
            return StoreError(f"{where}: an earlier write failed and DuckDB closed the file for writing "
                              f"({_first_line(e)}); rows written before it are in the file. Run the command again")
        return StoreError(f"{where}: cannot write ({_first_line(e)})")

    def _checkpoint(self) -> None:
        """Move what was just committed from the write-ahead log into the file itself: a copy of the file
        alone then holds every trial, and a log cut short can lose no more than the write in flight."""
        if self.path is None or self.read_only:
            return
        try:
            self.con.execute("CHECKPOINT")
        except duckdb.Error:
            pass  # another connection's open transaction: the log holds the rows until the next checkpoint

    def record_presets(self, run_id: str, presets: Any) -> None:
        """Store the presets a run used, as JSON, so its numbers can be re-derived later."""
        self._writable()
        rows = []
        for kind, entries in (("model", presets.models), ("gpu", presets.gpus), ("machine", presets.machines)):
            for key, value in entries.items():
                rows.append((run_id, kind, str(key), json.dumps(plain(value), sort_keys=True), None))
        self.insert("presets", ("run_id", "kind", "id", "content", "file"), rows)

    # --- reading ---------------------------------------------------------------------------------

    def _fetch(self, sql: str, params: Any) -> tuple[list[str], list[tuple]]:
        """Run a read. A damaged file can pass the checks at open and fail on the block a query reads: that
        is a StoreError naming the file, like every other way a file can be wrong."""
        try:
            cur = self.con.execute(sql, params)
            return [d[0] for d in cur.description], cur.fetchall()
        except duckdb.InterruptException:
            raise KeyboardInterrupt from None  # Ctrl-C during a query: the caller's clean stop, not a traceback
        except (duckdb.IOException, duckdb.SerializationException, duckdb.InternalException,
                duckdb.FatalException, duckdb.CatalogException, duckdb.BinderException) as e:
            raise StoreError(f"{self.path or 'database'}: cannot read it; the file may be damaged, cut short or "
                             f"not ours ({_first_line(e)})") from None

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        names, rows = self._fetch(sql, list(params))
        return [dict(zip(names, row)) for row in rows]

    def query_named(self, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        names, rows = self._fetch(sql, params)
        return [dict(zip(names, row)) for row in rows]

    def trials(
        self,
        model: str | None = None,
        gpu: str | None = None,
        num_gpus: int | None = None,
        source: str | None = None,
        run_id: str | None = None,
        feasible: bool | None = None,
        order: str = "model, gpu, num_gpus, num_nodes, days NULLS LAST",
    ) -> list[dict[str, Any]]:
        where, params = [], []
        for column, value in (("model", model), ("gpu", gpu), ("num_gpus", num_gpus), ("run_id", run_id),
                              ("feasible", feasible)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if source is not None:
            where.append("source LIKE ?")
            params.append(source.replace("*", "%"))
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        return self.query(f"SELECT * FROM trials {clause} ORDER BY {order}", params)

    def done_keys(self, keys: Iterable[str], final_only: bool = False, pruned_final: bool = True) -> set[str]:
        """Which trial keys already have a result: a resumed sweep skips them. With final_only, a
        timeout, a crash or a stop does not count: those are tried again; without pruned_final, neither
        does a combination that was pruned (dominated) rather than measured."""
        keys = list(keys)
        if not keys:
            return set()
        final = ""
        if final_only:
            kinds = "'oom', 'dominated', 'refused'" if pruned_final else "'oom', 'refused'"
            measured = "feasible" if pruned_final else (
                "(feasible AND failure_kind IS NULL AND coalesce(provenance, '') NOT LIKE '%\"stopped_early\"%')")
            final = f" AND ({measured} OR failure_kind IN ({kinds}))"
        _, rows = self._fetch(f"SELECT DISTINCT key FROM trials WHERE key IN (SELECT unnest(?)){final}", [keys])
        return {r[0] for r in rows}

    def repeated_failures(self, keys: Iterable[str], at_least: int = 2) -> dict[str, str]:
        """Trial keys that crashed or timed out at least `at_least` times and never got a result: a key
        -> its last failure message. A resumed sweep gives up on them (a host running out of memory kills
        the same trial every time) unless asked to retry."""
        keys = list(keys)
        if not keys:
            return {}
        _, rows = self._fetch(
            """SELECT key, coalesce(arg_max(coalesce(failure_message, failure_kind), created_at), 'failed')
               FROM trials WHERE key IN (SELECT unnest(?))
               GROUP BY key
               HAVING count(*) FILTER (WHERE failure_kind IN ('failed', 'timeout')) >= ?
                  AND count(*) FILTER (WHERE feasible OR failure_kind IN ('oom', 'dominated', 'refused')) = 0""",
            [keys, at_least])
        return {k: m for k, m in rows}

    def runs(self) -> list[dict[str, Any]]:
        """Every run, oldest first; one left 'running' by a process that is gone reads 'interrupted'."""
        rows = self.query("SELECT * FROM runs ORDER BY started_at NULLS FIRST")
        for r in rows:
            if r["status"] == "running" and r["run_id"] not in _LIVE_RUNS:
                r["status"] = "interrupted"
        return rows

    def summary(self) -> list[dict[str, Any]]:
        return self.query(
            """SELECT source, count(*) AS trials, count(DISTINCT model) AS models,
                      count(DISTINCT gpu) AS gpus, sum(CASE WHEN feasible THEN 1 ELSE 0 END) AS feasible,
                      sum(CASE WHEN plausibility IN ('implausible', 'impossible') THEN 1 ELSE 0 END) AS flagged
               FROM trials GROUP BY source ORDER BY source"""
        )


# Runs this process is writing now (Store.start_run): any other run still marked 'running' is over.
_LIVE_RUNS: set[str] = set()


# Files this process found free of stored SQL, by identity (device, inode, size, modification time): the scan
# lists every DuckDB function (~30 ms), and a command or the app opens one file more than once. A file written
# since has another identity and is scanned again; files opened for writing are scanned every time.
_CODE_FREE: set[tuple[int, int, int, int]] = set()


def _identity(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class _bounded:
    """Interrupt what runs on `con` past READ_BOUND_S: reading a file from elsewhere never hangs the caller."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, limit_s: float | None = None):
        import threading

        self.path, self.limit = path, READ_BOUND_S if limit_s is None else limit_s
        self.timer = threading.Timer(self.limit, con.interrupt)
        self.timer.daemon = True

    def __enter__(self) -> "_bounded":
        self.timer.start()
        return self

    def __exit__(self, kind: Any, e: Any, tb: Any) -> None:
        self.timer.cancel()
        if isinstance(e, duckdb.InterruptException):
            raise StoreError(f"{self.path}: reading it took longer than {self.limit:g} s, so it was stopped "
                             "(TUI_PLANNER_READ_BOUND_S sets the bound)") from None


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


def _create_atomically(path: Path) -> None:
    """A new results file appears whole or not at all: the schema is made in a file beside it, which is
    then linked into place (a process killed half-way leaves only that hidden file, removed next time)."""
    for old in path.parent.glob(f".{path.name}.*.creating*"):
        try:
            pid = int(old.name.split(".creating")[0].rsplit(".", 1)[1])
            os.kill(pid, 0)  # its creator is still at work
        except ProcessLookupError:
            old.unlink(missing_ok=True)
        except (ValueError, IndexError, PermissionError):
            pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.creating")
    tmp.unlink(missing_ok=True)
    try:
        con = schema.connect(str(tmp))
        try:
            Store(con, tmp, False)._create()
            con.execute("CHECKPOINT")
        finally:
            con.close()
        try:
            os.link(tmp, path)  # fails if another process made the file meanwhile: theirs stands
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            if not path.exists():
                os.replace(tmp, path)
    except duckdb.Error as e:
        raise StoreError(f"{path}: cannot create it ({_first_line(e)})") from None
    finally:
        tmp.unlink(missing_ok=True)
        Path(str(tmp) + ".wal").unlink(missing_ok=True)


def _lock_holder(e: Exception) -> str:
    for line in str(e).splitlines():
        if "PID" in line:
            return line.strip()
    return "the file is locked"


def final_outcome_sql(t: str = "") -> str:
    """SQL: a row whose outcome is final (`t` prefixes the columns, e.g. "t."): a time, or a verdict that the
    combination cannot run here. A crash, a timeout or a stop says nothing about the combination. Findings
    take a cell's latest such row, and a later one supersedes earlier ones (engine.data.jsonl)."""
    return (f"(({t}feasible AND {t}days IS NOT NULL AND {t}failure_kind IS NULL) "
            f"OR {t}failure_kind IN ('oom', 'dominated', 'refused'))")


def provenance_of(value: Any) -> dict[str, Any]:
    """A row's provenance as a dict: stored as JSON text, it may be anything in a shared file (not JSON, not
    an object), which reads as empty."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or not value:
        return {}
    try:
        parsed = json.loads(value)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


@functools.lru_cache(maxsize=2048)
def _provenance_parsed(text: str) -> Mapping[str, Any]:
    return MappingProxyType(provenance_of(text))


def provenance_view(value: Any) -> Mapping[str, Any]:
    """provenance_of for code that only reads it: the predictor reads every row's provenance again for each
    of the many fits its validation makes, so the text is parsed once and the result shared, read-only."""
    if isinstance(value, str):
        return _provenance_parsed(value)
    return provenance_of(value)


def plain(value: Any) -> Any:
    """A value as JSON can hold it: dataclasses and mappings as dicts, dates as ISO text."""
    if dataclasses.is_dataclass(value):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value
