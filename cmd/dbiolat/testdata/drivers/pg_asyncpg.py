"""How asyncpg talks to PostgreSQL when it wants a row or a few, one case
per run, each on its own table so that pg_stat_statements tells the cases
apart:

  fetchrow  100 Connection.fetchrow calls, autocommit: each an Execute whose
            row limit is 1, its portal suspended, dropped at the Sync
  cursor    20 cursors in one transaction, each read for 5 rows and left
            (named portals suspended), all dropped by the COMMIT

Connection parameters come from the PG* environment (a unix socket).
"""
import asyncio
import sys

import asyncpg


async def main(case):
    conn = await asyncpg.connect()
    table = "drv_a" + case
    try:
        await conn.execute(f"DROP TABLE IF EXISTS {table}")
        await conn.execute(f"CREATE TABLE {table} (id int, v text)")
        await conn.execute(f"INSERT INTO {table} SELECT g, 'row' FROM generate_series(1, 50) g")
        if case == "fetchrow":
            for i in range(100):
                row = await conn.fetchrow(f"SELECT id, v FROM {table} WHERE id > $1 ORDER BY id", i % 5)
                assert row is not None
        elif case == "cursor":
            async with conn.transaction():
                for i in range(20):
                    cur = await conn.cursor(f"SELECT id, v FROM {table} WHERE id > $1 ORDER BY id", i)
                    rows = await cur.fetch(5)
                    assert len(rows) == 5, rows
        else:
            raise SystemExit(f"unknown case {case}")
    finally:
        await conn.close()
    print(case, "done")


asyncio.run(main(sys.argv[1]))
