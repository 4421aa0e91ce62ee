// Package netlab builds a throw-away lab of "hosts" out of Linux network namespaces so
// integration tests can run every broker node, the name server and the client on its own
// address and cut the links between them silently, the way a real network partition behaves
// (packets vanish; nobody gets an RST or an ICMP error). Loopback-only tests cannot do that:
// every process shares one stack, so a partition can only be faked inside the code under test.
//
// A test builds a lab, runs its programs on the hosts and cuts links while they run:
//
//	lab, err := netlab.New(3)
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Cleanup(func() { lab.Close() })
//	h := lab.Hosts()
//	broker := h[0].Command(brokerBin, "-listen", h[0].IP+":10911")
//	// ... start programs on h[1], h[2] the same way ...
//	lab.Cut(h[0], h[1]) // h0 and h1 no longer hear each other; h2 still hears both
//	lab.Heal()
//
// Test code in the test process itself can also act on a host: Host.Listen, ListenPacket and
// DialTimeout open sockets inside the host's namespace.
//
// # Topology
//
// A lab with n hosts is n+1 namespaces. The switch namespace holds a bridge and nothing else;
// each host namespace holds lo and one veth whose other end is a port of that bridge:
//
//	                   namespace <lab>-sw  (no address, no route)
//	      +--------------------------- br0 ---------------------------+
//	      | h0                         | h1                           | h<n-1>
//	      |                            |                              |
//	    eth0                         eth0                           eth0
//	namespace <lab>-h0           namespace <lab>-h1      ...    namespace <lab>-h<n-1>
//	10.213.K.1/24 + lo           10.213.K.2/24 + lo             10.213.K.n/24 + lo
//
// The lab name is "rrlab<pid>x<K>": pid is the creating process, K the lab's index. Interface
// names never derive from namespace names (the switch ports are "h<i>", every host's interface
// is "eth0", the bridge is "br0"), so the 15-character interface name limit never bites, and
// the veth pair is created directly in the switch with its peer placed in the host: no
// interface ever exists in the root namespace, not even for a moment.
//
// # Address plan
//
// Host i of lab K is 10.213.K.(i+1)/24, K in 1..254. K is the lowest index no existing lab
// namespace (from any process) carries; it is picked and claimed (by creating the switch
// namespace) under an exclusive flock on /run/lock/rocketraft-netlab.lock (the only file the
// package creates outside the netns directory), so labs built at the same time, in one process
// or several, never share a subnet. Hosts have no default route and the switch
// has no address at all, so nothing a host sends can leave the lab: an address outside the
// host's own /24 is simply unreachable. IPv6 is disabled on every lab link (lo keeps ::1), so
// the links carry IPv4 and ARP only. Nothing is ever configured in the root namespace.
//
// # Partitions
//
// Cut, CutOneWay and Isolate add nftables "drop" rules (never reject) in the receiving host's
// own namespace, in a table "inet netlab" hooked at prerouting; the sender's packets leave
// normally and disappear on arrival, so the sender sees neither an error nor an RST. Heal
// deletes that table in every host. The root namespace's ruleset is never touched.
//
// # Cleanup guarantees
//
// The lab starts no long-lived processes. Close deletes the veths and then every namespace the
// lab created, in reverse order; it is idempotent and also undoes a half-built lab (New calls
// it itself when a step fails). Close does not kill processes the caller started with
// Host.Command: a process still running in a host keeps that namespace alive, unnamed and
// without its link, until it exits, so tests must stop their own processes. Namespaces left by
// a crashed test run are removed by Sweep (which New also runs) once their creator PID is dead.
package netlab
