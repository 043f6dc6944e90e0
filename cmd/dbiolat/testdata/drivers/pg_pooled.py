"""Queries through a pooler, as psycopg 3 sends them:

  pg_pooled.py NAME N

connects with application_name=NAME (PG* environment: pgbouncer's host and
port), prints "port P", its connection's own TCP port, runs
"SELECT %s::int AS pooled_probe" N times and prints "done". Prepared
statements are off: pgbouncer's transaction pooling does not carry them
from one server connection to the next.
"""
import socket
import sys

import psycopg

name, n = sys.argv[1], int(sys.argv[2])
with psycopg.connect(autocommit=True, application_name=name, prepare_threshold=None) as conn:
    sock = socket.socket(fileno=conn.pgconn.socket)
    print("port", sock.getsockname()[1], flush=True)
    sock.detach()
    for i in range(n):
        conn.execute("SELECT %s::int AS pooled_probe", (i,))
print("done", flush=True)
