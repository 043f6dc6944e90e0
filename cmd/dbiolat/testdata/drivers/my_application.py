"""Queries from an application that names itself to MariaDB, as PyMySQL
sends them: program_name=NAME in the handshake's connection attributes,
then N times "SELECT %s AS app_probe".

Run as `python3 my_application.py SOCKET NAME N`, as the OS user root
(unix_socket authentication). Prints what it ran.
"""
import sys

import pymysql

socket, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
conn = pymysql.connect(unix_socket=socket, user="root", database="test", autocommit=True, program_name=name)
with conn.cursor() as cur:
    for i in range(n):
        cur.execute("SELECT %s AS app_probe", (i,))
conn.close()
print(name, n, "done")
