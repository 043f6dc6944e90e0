"""A paced OLTP load on MariaDB as PyMySQL sends it: each transaction is
BEGIN, a SELECT by key, an UPDATE, an INSERT, a DELETE and COMMIT (six
COM_QUERY commands), CLIENTS connections each at RATE transactions a
second, for SECONDS. Its tables are load_acct (ids 0 to 999) and
load_hist, in database test.

Run as `python3 my_load.py SOCKET CLIENTS RATE SECONDS`, as the OS user
root (unix_socket authentication). Prints the transactions it ran.
"""
import random
import sys
import threading
import time

import pymysql

socket, clients, rate, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
done = [0] * clients


def client(n):
    conn = pymysql.connect(unix_socket=socket, user="root", database="test", autocommit=True)
    rnd = random.Random(n)
    start = time.monotonic()
    with conn.cursor() as cur:
        while time.monotonic() - start < seconds:
            # Paced: the i-th transaction starts at i/rate, late ones at once.
            wait = start + done[n] / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            aid = rnd.randrange(1000)
            conn.begin()
            cur.execute("SELECT n FROM load_acct WHERE id = %s", (aid,))
            cur.fetchall()
            cur.execute("UPDATE load_acct SET n = n + 1 WHERE id = %s", (aid,))
            cur.execute("INSERT INTO load_hist (acct, at) VALUES (%s, NOW(6))", (aid,))
            cur.execute("DELETE FROM load_hist WHERE acct = %s AND at < NOW(6) - INTERVAL 1 SECOND", (aid,))
            conn.commit()
            done[n] += 1
    conn.close()


threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sum(done), "transactions")
