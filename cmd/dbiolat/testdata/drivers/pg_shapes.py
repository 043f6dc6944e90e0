"""Three statements run N times each with other values, the three ways
psycopg 3 sends a statement (for serve's statement identities without the
server's query ids):

  shape_x  the extended protocol, unnamed: Parse/Bind/Execute each time
  shape_y  a named prepared statement (prepare=True): Bind/Execute
  shape_z  the simple protocol, the value inline (ClientCursor)

Connection parameters come from the PG* environment (a unix socket).
"""
import sys

import psycopg

n = int(sys.argv[1])
with psycopg.connect(autocommit=True) as conn:
    for i in range(n):
        conn.execute("SELECT %s::int AS shape_x", (i,), prepare=False)
        conn.execute("SELECT %s::int + 1 AS shape_y", (i,), prepare=True)
        with psycopg.ClientCursor(conn) as cur:
            cur.execute("SELECT %s AS shape_z", (i * 7,))
