"""Clients of MySQL Router, each a PyMySQL connection over TLS (the
certificate not verified), logged in as USER with its password its name:

  python3 my_router.py HOST:PORT USER CLIENTS STATEMENTS

Client k connects as program_name router-k, one after another, then they
take turns, each running `SELECT n AS router_k, CONNECTION_ID()` STATEMENTS
times, a pause after each turn: time for a Router sharing server
connections to put the idle one back in its pool, so that the next client
takes it. Prints a line per client: its name, its own port (the Router's
peer), the server connections it ran on (CONNECTION_ID(), comma-separated)
and the port the server was told it comes from (the connection attribute
_client_port a Router ending TLS adds; - if none).
"""
import ssl
import sys
import time

import pymysql

host, port = sys.argv[1].rsplit(":", 1)
user, clients, statements = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
unverified = ssl.create_default_context()
unverified.check_hostname = False
unverified.verify_mode = ssl.CERT_NONE
conns = []
for k in range(clients):
    conns.append(pymysql.connect(host=host, port=int(port), user=user, password=user, ssl=unverified,
                                 program_name=f"router-{k}", autocommit=True))
    time.sleep(0.05)
ran_on = [set() for _ in conns]
for n in range(statements):
    for k, conn in enumerate(conns):
        with conn.cursor() as cur:
            cur.execute(f"SELECT %s AS router_{k}, CONNECTION_ID()", (n,))
            ran_on[k].add(cur.fetchone()[1])
        time.sleep(0.02)
for k, conn in enumerate(conns):
    with conn.cursor() as cur:
        cur.execute("SELECT ATTR_VALUE FROM performance_schema.session_connect_attrs"
                    " WHERE PROCESSLIST_ID = CONNECTION_ID() AND ATTR_NAME = '_client_port'")
        told = cur.fetchone()
    print(f"router-{k}", conn._sock.getsockname()[1], ",".join(str(i) for i in sorted(ran_on[k])), told[0] if told else "-")
    conn.close()
