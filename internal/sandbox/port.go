package sandbox

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// FreePort is a TCP port of 127.0.0.1 that nothing listens on now, for a
// server about to start. It is below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range): a port of that range, free when we look,
// may become the local port of any outgoing connection (the tests make
// thousands) before the server binds it, and the server then fails with
// "Address already in use". A process walks the ports in turn, so it hands
// none out twice until it has walked them all, and processes start their
// walks at places their pids set apart, so servers of tests running side
// by side do not race for one port.
func FreePort() (int, error) {
	ports.Lock()
	defer ports.Unlock()
	if ports.low == 0 {
		ports.low, ports.next = ephemeralLow(), os.Getpid()
	}
	span := ports.low - firstPort
	for range span {
		ports.next++
		port := firstPort + ports.next%span
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // a server of this machine's, or of another test's
		}
		l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("sandbox: no free TCP port of 127.0.0.1 in %d-%d", firstPort, ports.low-1)
}

// firstPort is the lowest port FreePort gives: above those that services
// are known by (PostgreSQL's 5432, MySQL's 3306, 8080, 9090).
const firstPort = 20000

var ports struct {
	sync.Mutex
	low  int // the ephemeral range's first port; 0 until the first call
	next int // the walk's place: the next port is firstPort + (next+1) % span
}

// ephemeralLow is the first port of the kernel's ephemeral range; Linux's
// default, 32768, if it cannot be read or leaves too few below it.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if low, err := strconv.Atoi(f[0]); err == nil && low >= firstPort+1000 {
				return low
			}
		}
	}
	return 32768
}
