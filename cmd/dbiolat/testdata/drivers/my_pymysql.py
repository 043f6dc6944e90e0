"""How PyMySQL talks to MySQL and MariaDB, one case per run, each on its own table:

  executemany  100 rows by cursor.executemany: one multi-row INSERT
  multi        one COM_QUERY holding three statements (CLIENT_MULTI_STATEMENTS)
  unbuffered   a SELECT of 20,000 rows read row by row (SSCursor)
  loaddata     LOAD DATA LOCAL INFILE of 1,000 rows: the server asks for the file

Run as `python3 my_pymysql.py TARGET CASE [USER PASSWORD]`: TARGET a unix
socket's path (as USER, root by default: MariaDB's unix_socket
authentication, MySQL's root without a password) or HOST:PORT over TLS
(the server's own certificate, not verified). The table's name ends in
$DRV_SUFFIX, if set (a transport's statements told apart). Prints what it ran.
"""
import os
import ssl
import sys
import tempfile

import pymysql
import pymysql.constants.CLIENT as CLIENT
import pymysql.cursors

target, case = sys.argv[1], sys.argv[2]
user, password = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else ("root", "")
where = {"unix_socket": target}
if not target.startswith("/"):
    host, port = target.rsplit(":", 1)
    unverified = ssl.create_default_context()
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE
    where = {"host": host, "port": int(port), "ssl": unverified}
conn = pymysql.connect(user=user, password=password, database="test", autocommit=True,
                       local_infile=True, client_flag=CLIENT.MULTI_STATEMENTS, **where)
if "ssl" in where:
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        if not cur.fetchone()[1]:
            sys.exit("the session is not over TLS")
table = "drv_" + case + os.environ.get("DRV_SUFFIX", "")
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
        cur.execute(f"INSERT INTO {table} VALUES " + ", ".join(f"({i}, 'row')" for i in range(20000)))
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
