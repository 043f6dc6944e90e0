package sqlnorm

import (
	"strings"
	"testing"
)

func TestSummary(t *testing.T) {
	for _, c := range []struct{ query, want string }{
		{"SELECT abalance FROM pgbench_accounts WHERE aid = $1", "SELECT pgbench_accounts"},
		{"UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2", "UPDATE pgbench_tellers"},
		{"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)", "INSERT pgbench_history"},
		{"insert into orders select * from carts join users on a = b", "INSERT orders SELECT carts users"},
		{"SELECT c FROM sbtest1 WHERE id=?", "SELECT sbtest1"},
		{"SELECT * FROM `db`.`t` WHERE x IN (SELECT y FROM \"u\")", "SELECT `db`.`t` SELECT \"u\""},
		{"DELETE FROM t WHERE a = ?", "DELETE t"},
		{"BEGIN", "BEGIN"},
		{"BEGIN; SELECT $1; COMMIT", "BEGIN SELECT COMMIT"},
		{"SELECT $1", "SELECT"},
		{"SELECT * FROM (SELECT 1) s", "SELECT SELECT"},
		{"create table t (a int)", "CREATE t"},
		{"", ""},
	} {
		if got := Summary(c.query); got != c.want {
			t.Errorf("Summary(%q) = %q, want %q", c.query, got, c.want)
		}
	}
	long := "SELECT * FROM " + strings.Repeat("t JOIN ", 200) + "u"
	if got := Summary(long); len(got) > maxSummary {
		t.Errorf("Summary of %d bytes: %d bytes, over %d", len(long), len(got), maxSummary)
	}
}
