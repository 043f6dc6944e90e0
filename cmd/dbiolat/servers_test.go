package main

// The PostgreSQL servers the end-to-end tests run on: Debian's 15 for a
// test of one server, every major version (pgsandbox.Versions) for the
// matrix tests, each on a server of its own.

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/testenv"
	"github.com/dbiolat/dbiolat/internal/usdt"
)

// startPG starts Debian's PostgreSQL 15, the build with USDT probes, for
// one test: stopped at its end.
func startPG(t *testing.T, settings map[string]string) *pgsandbox.Cluster {
	t.Helper()
	return startVersion(t, "", settings)
}

// startVersion starts a PostgreSQL major version (pgsandbox.Versions; ""
// is Debian's) for one test.
func startVersion(t *testing.T, version string, settings map[string]string) *pgsandbox.Cluster {
	t.Helper()
	testenv.NeedRoot(t)
	c, err := pgsandbox.Start(context.Background(), pgsandbox.Options{Version: version, Settings: settings})
	if err != nil {
		if errors.Is(err, pgsandbox.ErrNotInstalled) && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

// eachVersion runs a test on every PostgreSQL version, each on a server
// of its own started with settings, as subtests "pg15", "pg16"...
// PostgreSQL 18 and 19 read synchronously here (io_method=sync), as 17 does:
// its I/O workers' reads are another test's.
func eachVersion(t *testing.T, settings map[string]string, fn func(t *testing.T, c *pgsandbox.Cluster)) {
	t.Helper()
	versions(t, false, settings, fn)
}

// eachVersionAtOnce is eachVersion with the versions' subtests run side
// by side: for a test whose servers only count (statements against
// pg_stat_statements, the waterfall's order of boxes), whose traces
// name their server, and which neither drops the page cache nor needs
// the machine to itself. The suite's time is counted (CI's budget).
func eachVersionAtOnce(t *testing.T, settings map[string]string, fn func(t *testing.T, c *pgsandbox.Cluster)) {
	t.Helper()
	versions(t, true, settings, fn)
}

func versions(t *testing.T, atOnce bool, settings map[string]string, fn func(t *testing.T, c *pgsandbox.Cluster)) {
	t.Helper()
	for _, v := range pgsandbox.Versions {
		t.Run("pg"+v, func(t *testing.T) {
			if atOnce {
				t.Parallel()
			}
			s := maps.Clone(settings)
			if v >= "18" {
				s = withSetting(s, "io_method", "sync")
			}
			fn(t, startVersion(t, v, s))
		})
	}
}

// eachIOConfig is eachVersion, and then PostgreSQL 18 and 19 in their
// default configuration (io_method=worker, subtests "pg18-io-worker",
// "pg19-io-worker"): their I/O workers read for the queries, for their
// parallel workers too.
func eachIOConfig(t *testing.T, settings map[string]string, fn func(t *testing.T, c *pgsandbox.Cluster)) {
	t.Helper()
	eachVersion(t, settings, fn)
	for _, v := range ioWorkerVersions {
		t.Run("pg"+v+"-io-worker", func(t *testing.T) {
			fn(t, startVersion(t, v, withSetting(maps.Clone(settings), "io_method", "worker")))
		})
	}
}

// ioWorkerVersions are the versions with I/O workers (io_method=worker,
// their default).
var ioWorkerVersions = []string{"18", "19"}

// withSetting adds a setting to a (possibly nil) set of settings.
func withSetting(settings map[string]string, name, value string) map[string]string {
	if settings == nil {
		settings = map[string]string{}
	}
	settings[name] = value
	return settings
}

// hasUSDT says whether a server's binary carries USDT probes (Debian's
// builds do, the registry's do not).
func hasUSDT(c *pgsandbox.Cluster) bool {
	_, err := usdt.Open(filepath.Join(c.BinDir(), "postgres"))
	return err == nil
}

func psql(t *testing.T, c *pgsandbox.Cluster, sql string) string {
	t.Helper()
	out, err := c.Psql(context.Background(), "postgres", sql)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
