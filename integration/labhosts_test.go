package integration

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"rocketraft/internal/netlab"
)

// Lab placement: a test can run with every process on its own host of a netlab lab (network
// namespaces on a bridge, internal/netlab) instead of on loopback. The parent test builds the
// lab and runs the test binary again inside the client host's namespace, with RR_LAB_HOSTS
// naming the hosts ("netns=ip" pairs, comma-separated: the name server's, then one per broker
// node). In that child every socket the test and the official client open lives in the client's
// namespace, mqnamesrv and mqbroker are started inside their hosts' namespaces (ip netns exec,
// which keeps the program's PID), and they listen and advertise on their hosts' addresses. The
// helpers above ask namesrvHost and brokerHost where to put a process; without RR_LAB_HOSTS it is
// loopback, as before.

// labHost is one host of the lab a child test runs in.
type labHost struct{ netns, ip string }

// labHosts is the placement of a child test (nil: loopback).
var labHosts []labHost

// loadLabHosts reads RR_LAB_HOSTS.
func loadLabHosts() error {
	v := os.Getenv("RR_LAB_HOSTS")
	if v == "" {
		return nil
	}
	for _, f := range strings.Split(v, ",") {
		ns, ip, ok := strings.Cut(f, "=")
		if !ok || ns == "" || ip == "" {
			return fmt.Errorf("RR_LAB_HOSTS=%q: want netns=ip pairs", v)
		}
		labHosts = append(labHosts, labHost{ns, ip})
	}
	if len(labHosts) < 2 {
		return fmt.Errorf("RR_LAB_HOSTS=%q: want the name server's host and at least one broker host", v)
	}
	return nil
}

// namesrvHost is where a name server runs: its address and network namespace.
func namesrvHost() (ip, netns string) {
	if labHosts == nil {
		return "127.0.0.1", ""
	}
	return labHosts[0].ip, labHosts[0].netns
}

// brokerHost is where node i of a group runs.
func brokerHost(i int) (ip, netns string) {
	if labHosts == nil {
		return "127.0.0.1", ""
	}
	h := labHosts[1+i%(len(labHosts)-1)]
	return h.ip, h.netns
}

// placeOn moves a broker that is not started yet onto a host.
func (b *broker) placeOn(ip, netns string) {
	b.netns = netns
	b.addr = ip + ":" + strconv.Itoa(b.port)
	b.props["brokerIP1"] = ip
}

// runInLab builds a lab of hosts-1 server hosts plus a client host and runs the test named
// test of this binary inside the client host, its processes placed on the others; env is added
// to the child's environment. The child's output is the parent's log; the parent fails if the
// child does. Labs need root, ip and nft: a machine without them fails the test.
func runInLab(t *testing.T, test string, servers int, timeout time.Duration, env ...string) {
	t.Helper()
	needBinaries(t)
	if err := netlab.Available(); err != nil {
		t.Fatalf("the network-namespace lab cannot be built here: %v", err)
	}
	_ = netlab.Sweep()
	lab, err := netlab.New(servers + 1)
	if err != nil {
		t.Fatalf("build the lab: %v", err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Logf("close the lab: %v", err)
		}
	})
	hosts := lab.Hosts()
	var spec []string
	for _, h := range hosts[:servers] {
		spec = append(spec, h.Name+"="+h.IP)
	}
	client := hosts[servers]
	args := []string{"-test.run", "^" + test + "$", "-test.v", "-test.count=1", "-test.timeout", timeout.String()}
	cmd := client.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), append(env, "RR_LAB_HOSTS="+strings.Join(spec, ","), "RR_BIN_DIR="+binDir)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the child test in %s: %v", client.Name, err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		t.Log(sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s in the lab (client %s, servers %v): %v", test, client.Name, spec, err)
	}
}

// TestChaosLeaderPauseNetns runs TestChaosLeaderPause with the name server and each node on
// its own host of a network-namespace lab and the producers on a fifth, as the pause that
// diverged a replica was first seen.
func TestChaosLeaderPauseNetns(t *testing.T) {
	if labHosts != nil {
		return // inside a lab already (a child runs only the test it was given, not this one)
	}
	t.Parallel()
	runInLab(t, "TestChaosLeaderPause", 4, 30*time.Minute)
}
