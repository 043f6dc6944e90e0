package sidroot

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Router is MySQL Router (the mysql root's, 9.7) in front of a MySQL
// server of the same root: the classic protocol routed from a port of
// 127.0.0.1 to the server's, as a static route (no InnoDB Cluster).
type Router struct {
	*Server
	Port int
}

// RouterMode is how the Router treats its clients' TLS.
type RouterMode int

const (
	// RouterPassthrough: TLS passes through, between the client and the
	// server (the Router's default when it has no certificate).
	RouterPassthrough RouterMode = iota
	// RouterTLS: the Router ends its clients' TLS and opens its own to
	// the server (client_ssl_mode and server_ssl_mode PREFERRED, as its
	// bootstrap configures it).
	RouterTLS
	// RouterSharing: RouterTLS, and server connections shared among
	// clients (connection_sharing, a pool of idle connections): one idle
	// at once goes back to the pool.
	RouterSharing
)

var routerModes = [...]string{"passthrough", "tls", "sharing"}

func (r RouterMode) String() string { return routerModes[r] }

// StartRouter starts MySQL Router, as how says, routing port of 127.0.0.1
// to m (a server of the mysql root), in mode; Stop stops it and removes
// its directory. With TLS ended at the Router, its certificate is the
// server's own.
func StartRouter(m *MySQL, how How, mode RouterMode, port int, log io.Writer) (*Router, error) {
	dir, err := NewDir(m.Root, "router-", "mysql")
	if err != nil {
		return nil, err
	}
	var conf strings.Builder
	fmt.Fprintf(&conf, "[DEFAULT]\nruntime_folder=%[1]s\ndata_folder=%[1]s\nlogging_folder=\n", dir)
	if mode != RouterPassthrough {
		fmt.Fprintf(&conf, "client_ssl_cert=%[1]s/data/server-cert.pem\nclient_ssl_key=%[1]s/data/server-key.pem\n", m.Dir)
		conf.WriteString("client_ssl_mode=PREFERRED\nserver_ssl_mode=PREFERRED\n")
	}
	if mode == RouterSharing {
		conf.WriteString("\n[connection_pool]\nmax_idle_server_connections=16\n")
	}
	fmt.Fprintf(&conf, "\n[routing:dbiolat]\nbind_address=127.0.0.1\nbind_port=%d\ndestinations=127.0.0.1:%d\nrouting_strategy=first-available\nprotocol=classic\n",
		port, m.Port)
	if mode == RouterSharing {
		conf.WriteString("connection_sharing=1\nconnection_sharing_delay=0\n")
	}
	file := filepath.Join(m.Root, dir, "router.conf")
	if err := os.WriteFile(file, []byte(conf.String()), 0o644); err != nil {
		os.RemoveAll(filepath.Join(m.Root, dir))
		return nil, fmt.Errorf("sidroot: %w", err)
	}
	ready := func() bool { // it listens once it routes
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	s, err := Start(m.Root, dir, how, "mysql", log, ready, "/usr/bin/mysqlrouter", "-c", dir+"/router.conf")
	if err != nil {
		os.RemoveAll(filepath.Join(m.Root, dir))
		return nil, err
	}
	return &Router{Server: s, Port: port}, nil
}

// Stop stops the Router and removes its directory.
func (r *Router) Stop() { r.Server.Stop(syscall.SIGTERM) }
