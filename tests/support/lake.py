#!/usr/bin/env python3
"""Reads a Tributary lake with DuckDB for the black-box tests and prints one JSON document.

usage: lake.py local <lake dir>
       lake.py rollup <lake dir> <app id>  (what the traffic rollups must show, by SQL)
       lake.py rollup-s3 <endpoint> <bucket> <app id>...
                                           (the same of each app, over an S3 lake: {app: ...})
       lake.py s3 <endpoint> <bucket>      (objects are fetched with boto3: DuckDB's httpfs
                                            extension cannot be downloaded on this machine)
       lake.py s3-ids <endpoint> <bucket>  (only the files and every row's message_id, for
                                            lakes of millions of rows)
       lake.py watch <lake dir> <stop file> <user id> <anonymous id>...
                                           (counts the lake in a loop until the stop file exists:
                                            files, and rows not of the person, as each read saw them)
"""
import json
import os
import sys
import tempfile
import time

import duckdb


def fetch_s3(endpoint, bucket, into):
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )
    n = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            target = os.path.join(into, obj["Key"])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            s3.download_file(bucket, obj["Key"], target)
            n += 1
    return n


def rollup(root, app_id):
    """Counts per type, exact distinct visitors and identified visitors, top 10 pages and
    events of one app, over the whole lake."""
    print(json.dumps(rollup_of(root, app_id)))


def rollup_s3(endpoint, bucket, apps):
    """`rollup` of each app over an S3 lake, fetched once: {app id: figures}."""
    with tempfile.TemporaryDirectory() as root:
        fetch_s3(endpoint, bucket, root)
        print(json.dumps({app: rollup_of(root, app) for app in apps}))


def rollup_of(root, app_id):
    if not any(n.endswith(".parquet") for _, _, names in os.walk(root) for n in names):
        return {"byType": {}, "events": 0, "visitors": 0, "identifiedVisitors": 0, "topPages": [], "topEvents": []}
    con = duckdb.connect()
    src = f"read_parquet('{root}/events/**/*.parquet', hive_partitioning=true, union_by_name=true)"
    rows = f"(select * from {src} where app_id = $app)"
    q = lambda sql: con.execute(sql, {"app": app_id}).fetchall()
    by_type = dict(q(f"select type, count(*) from {rows} group by type"))
    (visitors, identified), = q(
        f"select count(distinct anonymous_id), count(distinct anonymous_id) filter (where user_id is not null) from {rows}"
    )
    top = lambda col, kind: [
        [name, n]
        for name, n in q(
            f"select {col}, count(*) as n from {rows} where type = '{kind}' and {col} is not null "
            f"group by {col} order by n desc, {col} limit 10"
        )
    ]
    return {
        "byType": by_type, "events": sum(by_type.values()), "visitors": visitors,
        "identifiedVisitors": identified, "topPages": top("page_path", "page"), "topEvents": top("event", "track"),
    }


def s3_ids(endpoint, bucket):
    """The number of files and every row's message_id (duplicates kept), as JSON."""
    with tempfile.TemporaryDirectory() as root:
        files = fetch_s3(endpoint, bucket, root)
        ids = []
        if files:
            src = f"read_parquet('{root}/**/*.parquet')"
            ids = [r[0] for r in duckdb.connect().sql(f"select message_id from {src}").fetchall()]
        print(json.dumps({"files": files, "ids": ids}))


def watch(root, stop, user, anons):
    """Reads the whole lake again and again (as a reader would during an erasure) until `stop`
    exists; prints each distinct (files, rows of others) seen, how many reads, and any error.
    Each file is opened once and read whole (as one GET of an object), then counted by DuckDB:
    a file missing at its path, half written or read as two versions fails the read."""
    con = duckdb.connect()
    params = {"user": user, "anons": anons}
    seen, reads, errors = {}, 0, []
    # The stop file's directory gone: the test ended without `finish` (it failed); so do we.
    while not os.path.exists(stop) and os.path.isdir(os.path.dirname(stop)):
        files = []
        for d, _, names in os.walk(os.path.join(root, "events")):
            files += [os.path.join(d, n) for n in names if n.endswith(".parquet")]
        if not files:
            time.sleep(0.01)
            continue
        try:
            with tempfile.TemporaryDirectory() as copy:
                copies = []
                for i, f in enumerate(sorted(files)):
                    with open(f, "rb") as h:
                        data = h.read()
                    copies.append(os.path.join(copy, f"{i}.parquet"))
                    with open(copies[-1], "wb") as out:
                        out.write(data)
                (others,), = con.execute(
                    f"select count(*) filter (where coalesce(user_id, '') <> $user "
                    f"and not list_contains($anons, coalesce(anonymous_id, ''))) "
                    f"from read_parquet({copies!r})", params).fetchall()
        except Exception as e:  # a file missing under the reader, or half written
            errors.append(str(e)[:300])
            continue
        key = f"{len(files)} {others}"
        seen[key] = seen.get(key, 0) + 1
        reads += 1
    print(json.dumps({"seen": seen, "reads": reads, "errors": errors}))


def main():
    mode = sys.argv[1]
    if mode == "watch":
        return watch(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    if mode == "rollup":
        return rollup(sys.argv[2], sys.argv[3])
    if mode == "rollup-s3":
        return rollup_s3(sys.argv[2], sys.argv[3], sys.argv[4:])
    if mode == "s3-ids":
        return s3_ids(sys.argv[2], sys.argv[3])
    tmp = None
    if mode == "local":
        root = sys.argv[2]
    elif mode == "s3":
        tmp = tempfile.TemporaryDirectory()
        root = tmp.name
        fetch_s3(sys.argv[2], sys.argv[3], root)
    else:
        sys.exit(f"unknown mode {mode}")
    files = []
    for d, _, names in os.walk(os.path.join(root, "events")):
        files += [os.path.join(d, n) for n in names if n.endswith(".parquet")]
    out = {"files": [os.path.relpath(f, root) for f in sorted(files)], "types": {}, "rows": [], "timestamp_logical": None}
    if files:
        con = duckdb.connect()
        # The files listed above, not a second glob: a file landing in between would add its
        # rows to a view whose file list lacks it.
        src = f"read_parquet({files!r}, hive_partitioning=true, union_by_name=true)"
        rel = con.sql(f"select * from {src}")
        out["types"] = {c: str(t) for c, t in zip(rel.columns, rel.types)}
        cols = [
            "message_id", "app_id", "type", "event", "anonymous_id", "user_id", "group_id", "session_id",
            "epoch_us(timestamp)", "epoch_us(original_timestamp)", "epoch_us(sent_at)", "epoch_us(received_at)",
            "page_url", "page_path", "page_title", "page_referrer", "device_type", "locale", "timezone",
            "screen_width", "screen_height", "ip", "user_agent", "properties", "traits", "context",
            "name", "category", "previous_id", "integrations",
            "browser", "browser_version", "os", "device_class", "is_bot", "country", "region", "city",
            "json_valid(properties)", "dt", "hour",
        ]
        names = [c.replace("epoch_us(", "").replace("json_valid(", "valid_").rstrip(")") for c in cols]
        for r in con.sql(f"select {', '.join(cols)} from {src} order by received_at, message_id").fetchall():
            out["rows"].append({n: (str(v) if n in ("dt", "hour") and v is not None else v) for n, v in zip(names, r)})
        logical = con.sql(
            f"select logical_type from parquet_schema('{files[0]}') where name = 'timestamp'"
        ).fetchall()
        out["timestamp_logical"] = str(logical[0][0]) if logical else None
        # DuckDB's probe of the first file's Bloom filter on anonymous_id: whether it rules out
        # an id the file holds (never, or the filter is wrong), and how many of 20 it does not
        # hold it rules out (about all: 1% false positives).
        held = con.sql(f"select anonymous_id from read_parquet('{files[0]}') where anonymous_id is not null limit 1").fetchall()
        if held:
            def excluded(v):
                v = v.replace("'", "''")
                rows = con.sql(f"select bloom_filter_excludes from parquet_bloom_probe('{files[0]}', 'anonymous_id', '{v}')").fetchall()
                return bool(rows) and all(r[0] for r in rows)
            absent = sum(excluded(f"not-a-visitor-of-this-file-{i}") for i in range(20))
            out["anonymous_id_bloom"] = {"held_excluded": excluded(held[0][0]), "absent_excluded_of_20": absent}
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
