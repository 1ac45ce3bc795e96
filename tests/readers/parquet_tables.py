"""Reads the Parquet tables of `tracer export --format parquet` with two independent
readers, pyarrow and DuckDB, and prints what each finds as JSON:

    python parquet_tables.py DIR

{"pyarrow": FIGURES, "duckdb": FIGURES}, FIGURES being the row count of every table,
the messages' count and latency sum, the critical path's length as the sum of its work
activities, the calls per name (outermost calls only), the procedure rows and a few arc
figures. The test (tests/tests/integration/export_parquet.rs) compares both with
`tracer report --json` and with the recording itself.
"""

import json
import sys
from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.parquet as pq

TABLES = ["events", "calls", "messages", "critical_path", "arcs", "procedures"]
PROCEDURE_FIGURES = ["cp_ns", "cp_exclusive_ns", "work_ns", "zeroing_ns"]


def with_pyarrow(d):
    t = {name: pq.read_table(d / f"{name}.parquet") for name in TABLES}
    cp = t["critical_path"]
    work = cp.filter(pc.equal(cp["type"], "work"))
    msgs = t["messages"]
    calls = t["calls"].filter(pc.equal(t["calls"]["depth"], 0))
    per_call = calls.group_by("name").aggregate([("name", "count")])
    arcs = t["arcs"]
    program = arcs.filter(pc.equal(arcs["kind"], "program"))
    meta = cp.schema.metadata or {}
    return {
        "rows": {name: t[name].num_rows for name in TABLES},
        "messages": msgs.num_rows,
        "message_latency_ns": pc.sum(msgs["latency_ns"]).as_py() or 0,
        "message_span_ns": pc.sum(pc.subtract(msgs["receive_ns"], msgs["send_ns"])).as_py() or 0,
        # As DuckDB orders them: nulls (sizes nobody knew) last.
        "message_bytes": sorted(set(msgs["bytes"].to_pylist()), key=lambda b: (b is None, b or 0)),
        "critical_path_ns": pc.sum(work["work_ns"]).as_py() or 0,
        "critical_path_meta_ns": int(meta[b"tracer.critical_path_ns"]),
        "calls": dict(zip(per_call["name"].to_pylist(), per_call["name_count"].to_pylist())),
        "procedures": {
            row["name"]: [row[f] for f in PROCEDURE_FIGURES]
            for row in t["procedures"].to_pylist()
        },
        "program_work_ns": pc.sum(program["weight_ns"]).as_py() or 0,
        "min_total_slack_ns": pc.min(arcs["total_slack_ns"]).as_py(),
        "critical_program_arcs": program.filter(pc.equal(program["total_slack_ns"], 0)).num_rows,
    }


def with_duckdb(d):
    con = duckdb.connect()
    for name in TABLES:
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{d / name}.parquet')")

    def one(sql):
        return con.execute(sql).fetchone()[0]

    return {
        "rows": {name: one(f"SELECT count(*) FROM {name}") for name in TABLES},
        "messages": one("SELECT count(*) FROM messages"),
        "message_latency_ns": int(one("SELECT coalesce(sum(latency_ns), 0) FROM messages")),
        "message_span_ns": int(
            one("SELECT coalesce(sum(receive_ns - send_ns), 0) FROM messages")
        ),
        "message_bytes": [
            r[0] for r in con.execute("SELECT DISTINCT bytes FROM messages ORDER BY bytes").fetchall()
        ],
        "critical_path_ns": int(
            one("SELECT coalesce(sum(work_ns), 0) FROM critical_path WHERE type = 'work'")
        ),
        "critical_path_meta_ns": int(
            one(
                "SELECT decode(value) FROM parquet_kv_metadata('"
                + str(d / "critical_path.parquet")
                + "') WHERE decode(key) = 'tracer.critical_path_ns'"
            )
        ),
        "calls": dict(
            con.execute("SELECT name, count(*) FROM calls WHERE depth = 0 GROUP BY name").fetchall()
        ),
        "procedures": {
            r[0]: list(r[1:])
            for r in con.execute(
                "SELECT name, " + ", ".join(PROCEDURE_FIGURES) + " FROM procedures"
            ).fetchall()
        },
        "program_work_ns": int(
            one("SELECT coalesce(sum(weight_ns), 0) FROM arcs WHERE kind = 'program'")
        ),
        "min_total_slack_ns": one("SELECT min(total_slack_ns) FROM arcs"),
        "critical_program_arcs": one(
            "SELECT count(*) FROM arcs WHERE kind = 'program' AND total_slack_ns = 0"
        ),
    }


def main():
    d = Path(sys.argv[1])
    print(json.dumps({"pyarrow": with_pyarrow(d), "duckdb": with_duckdb(d)}))


main()
