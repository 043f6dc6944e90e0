package pgsandbox

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseLogins(t *testing.T) {
	log := `2026-11-26 13:48:39.577 UTC [387] LOG process up: PgBouncer 1.18.0, libevent 2.1.12-stable (epoll)
2026-11-26 13:48:44.256 UTC [387] LOG C-0x55a0f52d9570: postgres/postgres@127.0.0.1:38536 login attempt: db=postgres user=postgres tls=no
2026-11-26 13:48:44.256 UTC [387] LOG S-0x55a0f52e1a10: postgres/postgres@unix:5499 new connection to server (from unix:/tmp/pgbx/.s.PGSQL.5499)
2026-11-26 13:48:44.269 UTC [387] LOG C-0x55a0f52d9570: postgres/postgres@127.0.0.1:38536 closing because: client close request (age=0s)
2026-11-26 13:48:44.272 UTC [387] LOG C-0x55a0f52d97d0: app db/u@[::1]:38542 login attempt: db=app db user=u tls=no
2026-11-26 13:48:44.273 UTC [387] LOG C-0x55a0f52d97d0: postgres/postgres@unix(1234):6432 login attempt: db=postgres user=postgres tls=no
truncated line login attempt: 
`
	got := ParseLogins(log)
	want := []string{"127.0.0.1:38536", "[::1]:38542", "unix(1234):6432"} // a unix socket client: its pid
	if !slices.Equal(got, want) {
		t.Errorf("ParseLogins = %q, want %q", got, want)
	}
}

// A pgbouncer in front of a cluster forwards psql's query in both
// pooling modes and logs its client in.
func TestPgbouncer(t *testing.T) {
	c := startForTest(t, Options{})
	for _, mode := range []string{"session", "transaction"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p, err := c.StartPgbouncer(ctx, PgbouncerOptions{PoolMode: mode, PoolSize: 1})
			if errors.Is(err, ErrNoPgbouncer) && os.Getenv("CI") != "true" {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := p.Stop(); err != nil {
					t.Error(err)
				}
			})
			cmd := c.PsqlCmd(ctx, "postgres", append(p.ClientArgs(), "-At", "-c", "SELECT current_setting('application_name')")...)
			cmd.Env = append(cmd.Env, "PGAPPNAME=through-pgbouncer")
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "through-pgbouncer" {
				t.Fatalf("psql through pgbouncer: %q, %v", out, err)
			}
			logins, err := p.Logins()
			if err != nil || len(logins) != 1 || !strings.HasPrefix(logins[0], "127.0.0.1:") {
				t.Errorf("logins %q, %v: want psql's, from 127.0.0.1", logins, err)
			}
		})
	}
}
