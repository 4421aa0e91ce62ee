package integration

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"rocketraft/message"
	"rocketraft/protocol"
)

// raftGroup is one DLedger-mode broker group: mqbroker processes with the same brokerName,
// each a member of one Raft group through dLegerPeers.
type raftGroup struct {
	ns    *namesrv
	name  string // brokerName = dLegerGroup
	nodes []*broker
}

// startRaftGroup starts n DLedger brokers (ids n0..n<n-1>) on fresh ports and data directories
// and waits until each has registered with ns. They start together: no node registers before
// it knows its role, which needs a leader, which needs a majority running.
func startRaftGroup(t testing.TB, ns *namesrv, n int, opts ...brokerOpt) *raftGroup {
	t.Helper()
	needBinaries(t)
	g := &raftGroup{ns: ns, name: uniq("raftgroup")}
	peers := make([]string, n)
	for i := range n {
		ip, _ := brokerHost(i)
		peers[i] = fmt.Sprintf("n%d-%s:%d", i, ip, freePort(t))
	}
	for i := range n {
		b, dir := newRaftBroker(t, g)
		b.placeOn(brokerHost(i))
		b.props["dLegerPeers"] = strings.Join(peers, ";")
		b.props["dLegerSelfId"] = fmt.Sprintf("n%d", i)
		g.nodes = append(g.nodes, b.launch(t, dir, opts...))
	}
	for _, b := range g.nodes {
		if err := b.waitReady(30 * time.Second); err != nil {
			t.Fatalf("%s did not become ready: %v", b.proc.name, err)
		}
	}
	return g
}

// newRaftBroker prepares (does not start) a DLedger member of g on fresh ports in a fresh
// directory, which it returns; the caller sets dLegerPeers and dLegerSelfId, then launches it.
func newRaftBroker(t testing.TB, g *raftGroup) (*broker, string) {
	dir := t.TempDir()
	b := &broker{
		t:          t,
		name:       g.name,
		storeRoot:  filepath.Join(dir, "store"),
		nsAddr:     g.ns.addr,
		props:      dlegerProps(g.ns.addr),
		flags:      map[string]string{},
		configPath: filepath.Join(dir, "broker.properties"),
	}
	b.port = freePort(t, -2, 1)
	b.addr = "127.0.0.1:" + strconv.Itoa(b.port)
	b.props["brokerName"] = g.name
	b.props["storePathRootDir"] = b.storeRoot
	b.props["listenPort"] = strconv.Itoa(b.port)
	b.props["dLegerGroup"] = g.name
	// The Raft log in the commitlog, as the shipped configurations set it (config/dledger,
	// deploy); make integration/chaos/faults LOG_STORE=wal runs the whole suite on another store
	// (a test's own withProp still wins).
	b.props["dLegerLogStore"] = "commitlog"
	if store := os.Getenv("RR_LOG_STORE"); store != "" {
		b.props["dLegerLogStore"] = store
	}
	return b, dir
}

// commitLogStore reports whether b keeps its Raft log in its commitlog.
func (b *broker) commitLogStore() bool { return b.props["dLegerLogStore"] == "commitlog" }

// launch applies opts, writes the configuration and starts the broker process (registered for
// cleanup), without waiting for it to be ready.
func (b *broker) launch(t testing.TB, dir string, opts ...brokerOpt) *broker {
	for _, o := range opts {
		o(b)
	}
	b.noteTLS()
	b.writeConfig()
	b.proc = &proc{
		name:    fmt.Sprintf("mqbroker %s/%s", b.name, b.props["dLegerSelfId"]),
		bin:     filepath.Join(binDir, "mqbroker"),
		args:    []string{"-c", b.configPath},
		env:     []string{"HOME=" + dir},
		logPath: filepath.Join(dir, "mqbroker.log"),
		netns:   b.netns,
	}
	b.start(t)
	register(t, b.proc)
	return b
}

// dlegerProps is the test broker configuration (as startBroker's) in DLedger mode, with small
// commitlog and consume-queue files so a test's messages span several of them.
func dlegerProps(nsAddr string) map[string]string {
	return map[string]string{
		"brokerClusterName":         "DefaultCluster",
		"brokerIP1":                 "127.0.0.1",
		"namesrvAddr":               nsAddr,
		"mappedFileSizeCommitLog":   strconv.Itoa(16 << 10),
		"maxMessageSize":            strconv.Itoa(8 << 10),
		"flushDiskType":             "ASYNC_FLUSH",
		"autoCreateTopicEnable":     "true",
		"registerNameServerPeriod":  "2000",
		"maxHashSlotNum":            "50000",
		"maxIndexNum":               "200000",
		"mapedFileSizeConsumeQueue": strconv.Itoa(50 * 20),
		"enableDLegerCommitLog":     "true",
	}
}

// node returns the member whose remoting address is addr, or nil.
func (g *raftGroup) node(addr string) *broker {
	for _, b := range g.nodes {
		if b.addr == addr {
			return b
		}
	}
	return nil
}

// asCluster lets the single-broker helpers (readAll, ...) read from one member.
func (g *raftGroup) asCluster(b *broker) *cluster { return &cluster{ns: g.ns, b: b} }

var brokerAddrsRE = regexp.MustCompile(`"brokerAddrs"\s*:\s*\{([^}]*)\}`)
var brokerAddrRE = regexp.MustCompile(`"?(\d+)"?\s*:\s*"([^"]+)"`)

// routeAddrs returns the group's brokerId -> address map from the name server's route of
// topic (the only group in these tests' name servers).
func routeAddrs(nsAddr, topic string) (map[int64]string, error) {
	resp, err := rawRequest(nsAddr, codeGetRouteInfo, map[string]string{"topic": topic}, nil, 3*time.Second)
	if err != nil {
		return nil, fmt.Errorf("route query for %s: %w", topic, err)
	}
	if resp.Code != respSuccess {
		return nil, fmt.Errorf("route query for %s: code %d %q", topic, resp.Code, resp.Remark)
	}
	m := brokerAddrsRE.FindSubmatch(resp.Body)
	if m == nil {
		return nil, fmt.Errorf("route for %s has no brokerAddrs: %s", topic, resp.Body)
	}
	out := map[int64]string{}
	for _, kv := range brokerAddrRE.FindAllSubmatch(m[1], -1) {
		id, _ := strconv.ParseInt(string(kv[1]), 10, 64)
		out[id] = string(kv[2])
	}
	return out, nil
}

// registeredAddrs returns the group's brokerId -> address map as registered at the name server
// (GET_BROKER_CLUSTER_INFO): unlike a topic route, it never shows a stand-in master.
func registeredAddrs(nsAddr, brokerName string) (map[int64]string, error) {
	resp, err := rawRequest(nsAddr, codeGetBrokerClusterInfo, nil, nil, 3*time.Second)
	if err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	if resp.Code != respSuccess {
		return nil, fmt.Errorf("cluster info: code %d %q", resp.Code, resp.Remark)
	}
	var ci protocol.ClusterInfo
	if err := protocol.Decode(resp.Body, &ci); err != nil {
		return nil, fmt.Errorf("decode cluster info: %w", err)
	}
	bd := ci.BrokerAddrTable[brokerName]
	if bd == nil {
		return map[int64]string{}, nil
	}
	return bd.BrokerAddrs, nil
}

const codeGetBrokerClusterInfo = 106

// waitMaster waits until a running member other than not is registered as the group's master
// (brokerId 0 in the name server's cluster info, not a route's stand-in) and returns it. It polls
// every 20 ms (not eventually's back-off), so the failover time it measures is accurate to that.
func (g *raftGroup) waitMaster(t testing.TB, timeout time.Duration, not *broker) *broker {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		addrs, err := registeredAddrs(g.ns.addr, g.name)
		if err == nil {
			b := g.node(addrs[0])
			switch {
			case b == nil:
				err = fmt.Errorf("no master of ours registered: %v", addrs)
			case b == not || !b.running():
				err = fmt.Errorf("the registered master %s is the stopped node: %v", b.addr, addrs)
			default:
				return b
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no master of %s registered within %v: %v", g.name, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// commitLogDir is where a DLedger node's replicated commitlog lives (broker/raftgroup.go).
func commitLogDir(b *broker) string {
	return filepath.Join(b.storeRoot, "dledger-"+b.props["dLegerSelfId"], "store", "commitlog")
}

// compareCommitLogs checks that the nodes' commitlog files are byte-identical over their common
// prefix: the same file names in the same order, and within each file the same bytes up to the
// shorter copy's length. It returns the bytes compared per pair of nodes (the smallest).
func compareCommitLogs(t testing.TB, nodes []*broker) int64 {
	t.Helper()
	type file struct {
		name string
		data []byte
	}
	read := func(b *broker) []file {
		dir := commitLogDir(b)
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("read %s: %v", dir, err)
		}
		var out []file
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatalf("read commitlog file: %v", err)
			}
			out = append(out, file{e.Name(), data})
		}
		slices.SortFunc(out, func(a, b file) int { return strings.Compare(a.name, b.name) })
		return out
	}
	// Nodes that name their peers differently (each through its own link proxies, partition_test.go)
	// each bootstrapped a configuration entry of their own addresses: with the commitlog store its
	// header record, the first of the first file, differs by design. It is compared for its size
	// only (the records after it lie at the same offsets); every other byte must match.
	peerViews := false
	for _, b := range nodes[1:] {
		peerViews = peerViews || b.props["dLegerPeers"] != nodes[0].props["dLegerPeers"]
	}
	mask := func(files []file) []file {
		if peerViews && len(files) > 0 {
			if n := bootstrapEntrySize(files[0].data); n > 0 {
				files[0].data = append(make([]byte, n), files[0].data[n:]...)
			}
		}
		return files
	}
	read0 := read
	read = func(b *broker) []file { return mask(read0(b)) }
	ref := read(nodes[0])
	compared := int64(-1)
	for _, b := range nodes[1:] {
		other := read(b)
		var pair int64
		for i := range min(len(ref), len(other)) {
			if ref[i].name != other[i].name {
				t.Fatalf("commitlog files differ: %s has %s where %s has %s", nodes[0].proc.name, ref[i].name, b.proc.name, other[i].name)
			}
			// Up to the shorter copy's end of records: with dLegerLogStore=commitlog a node's
			// commitlog also holds the entries it wrote that the others never received (the
			// last ones before the nodes stopped, one after the other).
			n := min(commitLogDataEnd(ref[i].data), commitLogDataEnd(other[i].data))
			if !bytes.Equal(ref[i].data[:n], other[i].data[:n]) {
				at := 0
				for at < n && ref[i].data[at] == other[i].data[at] {
					at++
				}
				t.Fatalf("commitlog %s differs between %s and %s at byte %d: %s has %s, %s has %s", ref[i].name, nodes[0].proc.name, b.proc.name, at,
					nodes[0].proc.name, recordAround(ref[i].data, at), b.proc.name, recordAround(other[i].data, at))
			}
			pair += int64(n)
		}
		if compared < 0 || pair < compared {
			compared = pair
		}
	}
	return compared
}

// waitOffsetsConverged waits (up to timeout) until every node of g holds each of topic's first
// queues queues up to the max offset leader holds: the replicas caught up, ready to compare.
func (g *raftGroup) waitOffsetsConverged(t testing.TB, timeout time.Duration, leader *broker, topic string, queues int) {
	t.Helper()
	eventually(t, timeout, "every node at the leader's max offsets", func() error {
		for q := 0; q < queues; q++ {
			want, err := maxOffset(leader.addr, topic, q)
			if err != nil {
				return err
			}
			for _, b := range g.nodes {
				if got, err := maxOffset(b.addr, topic, q); err != nil || got != want {
					return fmt.Errorf("%s queue %d: max offset %d (%v), leader %d", b.proc.name, q, got, err, want)
				}
			}
		}
		return nil
	})
}

// bootstrapEntrySize is the size of the record data starts with when it is the entry header of
// the bootstrap configuration (index 1, raft.LogConfiguration) that the commitlog store writes,
// else 0.
func bootstrapEntrySize(data []byte) int {
	if len(data) < 8 {
		return 0
	}
	size := int(int32(binary.BigEndian.Uint32(data)))
	if size < message.MinRecordSize || size > len(data) {
		return 0
	}
	v, err := message.ParseView(data[:size])
	if err != nil || string(v.Topic()) != message.RaftEntryTopic || v.QueueOffset() != 1 {
		return 0
	}
	// the header's raft.LogType (fsm/entryheader.go: byte 5 after the "RREH" magic and version)
	if body := v.Body(); len(body) < 6 || string(body[:4]) != "RREH" || raft.LogType(body[5]) != raft.LogConfiguration {
		return 0
	}
	return size
}

// recordAround describes the record of a commitlog file's data that holds byte at (walking the
// records from the file's start), for a report of where two replicas differ.
func recordAround(data []byte, at int) string {
	for pos := 0; pos+8 <= len(data); {
		size := int(int32(binary.BigEndian.Uint32(data[pos:])))
		if size <= 0 || pos+size > len(data) {
			return fmt.Sprintf("no record at %d (size field %d)", pos, size)
		}
		if binary.BigEndian.Uint32(data[pos+4:]) == message.BlankMagicCode {
			return fmt.Sprintf("the blank end-of-file marker at %d", pos)
		}
		if at < pos+size {
			v, err := message.ParseView(data[pos : pos+size])
			if err != nil {
				return fmt.Sprintf("an unparsable record at %d (%d bytes): %v", pos, size, err)
			}
			return fmt.Sprintf("a record at %d (%d bytes, byte %d of it): topic %s queue %d offset %d sysflag %#x stored %d, body %q",
				pos, size, at-pos, v.Topic(), v.QueueID(), v.QueueOffset(), v.SysFlag(), v.StoreTimestamp(), v.Body()[:min(len(v.Body()), 24)])
		}
		pos += size
	}
	return "past the records"
}

// commitLogDataEnd is where a commitlog file's records end: at the first size field that is not a
// record's, or at the blank end-of-file marker (included).
func commitLogDataEnd(data []byte) int {
	pos := 0
	for pos+8 <= len(data) {
		size := int(int32(binary.BigEndian.Uint32(data[pos:])))
		if binary.BigEndian.Uint32(data[pos+4:]) == message.BlankMagicCode {
			return min(pos+8, len(data))
		}
		if size < message.MinRecordSize || pos+size > len(data) {
			break
		}
		pos += size
	}
	return pos
}
