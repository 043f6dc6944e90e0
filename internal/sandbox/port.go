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
// "Address already in use". A process does not hand a port out twice, and
// processes start their walks at places their pids set apart, so servers
// of tests running side by side do not race for one port.
func FreePort() (int, error) {
	ports.Lock()
	defer ports.Unlock()
	if ports.given == nil {
		ports.given = map[int]bool{}
		ports.low = ephemeralLow()
		ports.next = os.Getpid()
	}
	span := ports.low - firstPort
	for range span {
		ports.next++
		port := firstPort + ports.next%span
		if ports.given[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // a server of this machine's, or of another test's
		}
		l.Close()
		ports.given[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("sandbox: no free TCP port of 127.0.0.1 in %d-%d", firstPort, ports.low-1)
}

// firstPort is the lowest port FreePort gives: above those that services
// are known by (PostgreSQL's 5432, MySQL's 3306, 8080, 9090).
const firstPort = 20000

var ports struct {
	sync.Mutex
	given map[int]bool
	low   int // the ephemeral range's first port
	next  int
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
