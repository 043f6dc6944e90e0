package sandbox

import (
	"net"
	"strconv"
	"testing"
)

// FreePort's ports are below the ephemeral range, each given once, and
// skip one a server listens on.
func TestFreePort(t *testing.T) {
	first, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// A server listens on the port after it: FreePort passes it by.
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(first+1)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	low := ephemeralLow()
	seen := map[int]bool{first: true}
	for range 50 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port < firstPort || port >= low {
			t.Errorf("port %d, want %d to %d (below the ephemeral range)", port, firstPort, low-1)
		}
		if port == first+1 || seen[port] {
			t.Errorf("port %d given though listened on or given before", port)
		}
		seen[port] = true
	}
}
