package pgsandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// EnableTLS gives the server a self-signed certificate and turns ssl on:
// its TCP clients may then ask for TLS (sslmode=require). The cluster must
// listen on a TCP port (Settings listen_addresses and port).
func (c *Cluster) EnableTLS(ctx context.Context) error {
	cert, key := filepath.Join(c.DataDir(), "server.crt"), filepath.Join(c.DataDir(), "server.key")
	if out, err := exec.CommandContext(ctx, "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
		"-subj", "/CN=localhost", "-keyout", key, "-out", cert).CombinedOutput(); err != nil {
		return fmt.Errorf("making a certificate: openssl: %v: %s", err, out)
	}
	owner, err := os.Stat(c.DataDir())
	if err != nil {
		return err
	}
	st := owner.Sys().(*syscall.Stat_t) // the server's user
	for _, f := range []string{cert, key} {
		if err := os.Chmod(f, 0o600); err != nil {
			return err
		}
		if err := os.Chown(f, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	for _, sql := range []string{"ALTER SYSTEM SET ssl = on", "SELECT pg_reload_conf()"} {
		if _, err := c.Psql(ctx, "postgres", sql); err != nil {
			return err
		}
	}
	return nil
}
