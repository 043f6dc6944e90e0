"""Slow queries from an application instrumented with sqlcommenter: each
carries the W3C trace context of the application's span in a comment, as
sqlcommenter appends it, and sleeps 80 ms in the server.

  python3 traced.py pg    INTERVAL TRACEPARENT...   psycopg 3, PG* environment (a unix socket)
  python3 traced.py mysql INTERVAL TRACEPARENT...   PyMySQL, DBIOLAT_MYSQL_SOCKET, as the OS user root

INTERVAL is the pause in seconds between one query and the next, on one
connection; "burst" sends them all at once instead, each on its own
connection, released together once every connection is open.
Prints what it ran.
"""
import os
import sys
import threading
import time

engine, interval, parents = sys.argv[1], sys.argv[2], sys.argv[3:]


def connect():
    if engine == "pg":
        import psycopg
        return psycopg.connect(autocommit=True)
    if engine == "mysql":
        import pymysql
        return pymysql.connect(unix_socket=os.environ["DBIOLAT_MYSQL_SOCKET"], user="root", database="test", autocommit=True)
    sys.exit(f"unknown engine {engine}")


def text(traceparent):
    sleep = "pg_sleep(0.08)" if engine == "pg" else "SLEEP(0.08)"
    return f"SELECT {sleep} AS traced /*controller='orders',framework='shop',traceparent='{traceparent}'*/"


def run(conn, traceparent):
    if engine == "pg":
        conn.execute(text(traceparent)).fetchall()
    else:
        with conn.cursor() as cur:
            cur.execute(text(traceparent))
            cur.fetchall()


if interval == "burst":
    conns = [connect() for _ in parents]
    go = threading.Barrier(len(parents))

    def one(conn, traceparent):
        go.wait()
        run(conn, traceparent)

    threads = [threading.Thread(target=one, args=(c, p)) for c, p in zip(conns, parents)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in conns:
        c.close()
else:
    conn = connect()
    for i, traceparent in enumerate(parents):
        if i:
            time.sleep(float(interval))
        run(conn, traceparent)
    conn.close()
print(engine, len(parents), "traced queries done")
