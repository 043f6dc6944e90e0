"""How PyMySQL talks to MariaDB, one case per run, each on its own table:

  executemany  100 rows by cursor.executemany: one multi-row INSERT
  multi        one COM_QUERY holding three statements (CLIENT_MULTI_STATEMENTS)
  unbuffered   a SELECT of 20,000 rows read row by row (SSCursor)
  loaddata     LOAD DATA LOCAL INFILE of 1,000 rows: the server asks for the file

Run as `python3 my_pymysql.py SOCKET CASE`, as the OS user root (unix_socket
authentication). Prints what it ran.
"""
import os
import sys
import tempfile

import pymysql
import pymysql.constants.CLIENT as CLIENT
import pymysql.cursors

socket, case = sys.argv[1], sys.argv[2]
conn = pymysql.connect(unix_socket=socket, user="root", database="test", autocommit=True,
                       local_infile=True, client_flag=CLIENT.MULTI_STATEMENTS)
table = "drv_" + case
with conn.cursor() as cur:
    cur.execute(f"DROP TABLE IF EXISTS {table}")
    cur.execute(f"CREATE TABLE {table} (id int, v varchar(64))")
    if case == "executemany":
        cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", [(i, str(i)) for i in range(100)])
    elif case == "multi":
        cur.execute(f"INSERT INTO {table} VALUES (1, 'a'); UPDATE {table} SET v = 'b' WHERE id = 1; DELETE FROM {table} WHERE id = 2")
        while cur.nextset():
            pass
    elif case == "unbuffered":
        cur.execute(f"INSERT INTO {table} SELECT seq, 'row' FROM seq_1_to_20000")
        with conn.cursor(pymysql.cursors.SSCursor) as ss:
            ss.execute(f"SELECT id, v FROM {table}")
            rows = sum(1 for _ in ss)
        assert rows == 20000, rows
    elif case == "loaddata":
        with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as f:
            for i in range(1000):
                f.write(f"{i}\tloaded\n")
        try:
            cur.execute(f"LOAD DATA LOCAL INFILE '{f.name}' INTO TABLE {table}")
        finally:
            os.unlink(f.name)
    else:
        sys.exit(f"unknown case {case}")
conn.close()
print(case, "done")
