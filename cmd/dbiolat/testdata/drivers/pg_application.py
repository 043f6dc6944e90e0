"""Queries from applications that name themselves, as psycopg 3 sends them:

  connect NAME N   application_name=NAME at connect: N queries
  set NAME N       application_name=NAME-before at connect, N queries, then
                   SET application_name = 'NAME' and N queries more
  tls NAME N       as connect, over TLS (sslmode=require, host 127.0.0.1)

Each query is "SELECT %s::int AS app_probe" (pg_stat_statements counts
them). Connection parameters come from the PG* environment (a unix socket).
Prints what it ran.
"""
import sys

import psycopg
from psycopg import sql

mode, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])


def probe(conn, count):
    for i in range(count):
        conn.execute("SELECT %s::int AS app_probe", (i,))


if mode == "connect":
    with psycopg.connect(autocommit=True, application_name=name) as conn:
        probe(conn, n)
elif mode == "set":
    with psycopg.connect(autocommit=True, application_name=name + "-before") as conn:
        probe(conn, n)
        conn.execute(sql.SQL("SET application_name = {}").format(sql.Literal(name)))
        probe(conn, n)
elif mode == "tls":
    with psycopg.connect(autocommit=True, application_name=name, host="127.0.0.1", sslmode="require") as conn:
        ssl = conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()[0]
        if not ssl:
            sys.exit("the connection is not over TLS")
        probe(conn, n)
else:
    sys.exit(f"unknown mode {mode}")
print(mode, name, "done")
