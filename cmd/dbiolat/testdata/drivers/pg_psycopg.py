"""How psycopg 3 talks to PostgreSQL, one case per run, each on its own
table so that pg_stat_statements tells the cases apart:

  pipeline    2,000 INSERTs in conn.pipeline(): Parse/Bind/Execute each, one Sync
  executemany 100 rows by cursor.executemany (pipelined by psycopg)
  cursor      a named (server-side) cursor: DECLARE, FETCHes of 100, CLOSE
  copy        COPY FROM STDIN with 1,000 rows
  multi       a simple Query holding three statements
  error       a pipeline whose third statement fails: the rest are skipped

Connection parameters come from the PG* environment (a unix socket).
Prints what it ran as "case statements" for the test to read.
"""
import sys

import psycopg

case = sys.argv[1]
with psycopg.connect(autocommit=True) as conn:
    table = "drv_" + case
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} (id int, v text)")
    if case == "pipeline":
        with conn.pipeline():
            for i in range(2000):
                conn.execute(f"INSERT INTO {table} VALUES (%s, %s)", (i, "x" * (i % 50)))
    elif case == "executemany":
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", [(i, str(i)) for i in range(100)])
    elif case == "cursor":
        conn.execute(f"INSERT INTO {table} SELECT g, 'row' FROM generate_series(1, 650) g")
        with conn.transaction():
            with conn.cursor(name="drv_named") as cur:
                cur.itersize = 100
                cur.execute(f"SELECT id, v FROM {table} ORDER BY id")
                rows = sum(1 for _ in cur)
        assert rows == 650, rows
    elif case == "copy":
        with conn.cursor() as cur:
            with cur.copy(f"COPY {table} (id, v) FROM STDIN") as copy:
                for i in range(1000):
                    copy.write_row((i, "copied"))
    elif case == "multi":
        conn.execute(f"INSERT INTO {table} VALUES (1, 'a'); UPDATE {table} SET v = 'b' WHERE id = 1; DELETE FROM {table} WHERE id = 2")
    elif case == "error":
        try:
            with conn.pipeline():
                conn.execute(f"INSERT INTO {table} VALUES (1, 'ok')")
                conn.execute(f"INSERT INTO {table} VALUES (2, 'ok')")
                conn.execute(f"INSERT INTO {table} VALUES ('not a number', 'fails')")
                conn.execute(f"INSERT INTO {table} VALUES (4, 'skipped')")
                conn.execute(f"INSERT INTO {table} VALUES (5, 'skipped')")
        except psycopg.errors.InvalidTextRepresentation:
            pass
        else:
            sys.exit("the failing statement did not fail")
    else:
        sys.exit(f"unknown case {case}")
print(case, "done")
