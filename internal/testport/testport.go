// Package testport hands tests loopback TCP ports for servers they start themselves (in-process
// or as child processes). Listening on 127.0.0.1:0 and closing again is not enough: such a port
// comes from the kernel's ephemeral range, so any outgoing connection (a client, a Raft peer, a
// probe) can take it as its source port before the server binds it, and the server then fails
// with "address already in use". Ports here are drawn below that range instead, and never twice
// in one process.
package testport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var (
	mu   sync.Mutex
	used = map[int]bool{} // ports handed out in this process
)

// Free returns a loopback port that was free a moment ago and that no other caller in this
// process has been given. with lists offsets (e.g. -2, +1) that must be free as well: servers
// that derive ports from a base port (RocketMQ's HA port is listenPort+1, its VIP channel
// listenPort-2).
func Free(t testing.TB, with ...int) int {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	lo, hi := Range()
	for range 500 {
		p := lo + rand.IntN(hi-lo)
		all := []int{p}
		for _, d := range with {
			all = append(all, p+d)
		}
		ok := true
		var held []net.Listener
		for _, q := range all {
			if q <= 1024 || q > 65535 || used[q] {
				ok = false
				break
			}
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				ok = false
				break
			}
			held = append(held, l)
		}
		for _, l := range held {
			l.Close()
		}
		if ok {
			for _, q := range all {
				used[q] = true
			}
			return p
		}
	}
	t.Fatalf("no free loopback port found in %d-%d", lo, hi)
	return 0
}

// Addr is Free as a "127.0.0.1:port" address.
func Addr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(Free(t))
}

// Range is where Free draws ports: from 10000 up to the start of the kernel's ephemeral range
// (Linux default 32768), or 10000-30000 when that range cannot be read or leaves too little room.
func Range() (lo, hi int) {
	lo, hi = 10000, 30000
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(data))
	if len(f) == 2 {
		if eph, err := strconv.Atoi(f[0]); err == nil && eph-2 > lo+5000 {
			hi = eph - 2 // room for the +1 offsets callers ask for
		}
	}
	return lo, hi
}
