package integration

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Prometheus metrics on real processes: the broker's /metrics on httpPort and the name
// server's on its httpPort, with RocketMQ 5's names and labels, moving with traffic.

// sample is one line of a Prometheus text scrape.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	labelRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// scrapeMetrics GETs url and parses the text format.
func scrapeMetrics(url string) ([]sample, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: status %d, %v", url, resp.StatusCode, err)
	}
	var out []sample
	for _, line := range strings.Split(string(body), "\n") {
		m := sampleRE.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: bad value in %q", url, line)
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, l := range labelRE.FindAllStringSubmatch(m[2], -1) {
			s.labels[l[1]] = l[2]
		}
		out = append(out, s)
	}
	return out, nil
}

// find returns the samples named name whose labels include want.
func find(ss []sample, name string, want map[string]string) []sample {
	var out []sample
next:
	for _, s := range ss {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// one returns the value of the single sample named name with labels want, or an error.
func one(ss []sample, name string, want map[string]string) (float64, error) {
	got := find(ss, name, want)
	if len(got) != 1 {
		return 0, fmt.Errorf("%d samples of %s%v, want 1", len(got), name, want)
	}
	return got[0].value, nil
}

// TestMetricsClassic: a name server and a classic broker, each with an http port. After N sends
// with the official Go client and their consumption, the broker's counters count them under
// cluster/node_type/node_id/topic/consumer_group labels, its rpc latency counts the sends, the
// consumer lag is 0, and it grows again when more is sent with no consumer; the name server
// counts registrations and route queries and knows the broker.
func TestMetricsClassic(t *testing.T) {
	t.Parallel()
	nsHTTP := freePort(t)
	ns := startNamesrv(t, "--httpPort="+strconv.Itoa(nsHTTP))
	httpPort := freePort(t)
	c := &cluster{ns: ns, b: startBroker(t, ns, withProp("httpPort", strconv.Itoa(httpPort)))}
	brokerURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", httpPort)
	nsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", nsHTTP)
	id := map[string]string{"cluster": "DefaultCluster", "node_type": "broker", "node_id": c.b.name}

	ss, err := scrapeMetrics(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rocketmq_storage_size", "rocketmq_storage_flush_behind_bytes", "rocketmq_storage_disk_used_ratio",
		"rocketmq_storage_disk_max_used_ratio", "rocketmq_broker_permission", "rocketmq_topic_number"} {
		if _, err := one(ss, name, id); err != nil {
			t.Errorf("before traffic: %v", err)
		}
	}
	if v, _ := one(ss, "rocketmq_storage_disk_max_used_ratio", id); v != 75 {
		t.Errorf("rocketmq_storage_disk_max_used_ratio %v, want 75", v)
	}

	topic, group := uniq("Metrics"), uniq("GMetrics")
	const n = 20
	p := newProducer(t, c)
	sendSync(t, p, topic, "m", n, nil)
	pc := startPushConsumer(t, c, group, topic, all)
	eventually(t, 60*time.Second, "consumer receives all", func() error { return countErr("push consumer", pc.got.count(), n) })

	topicL := map[string]string{"cluster": "DefaultCluster", "node_type": "broker", "node_id": c.b.name, "topic": topic}
	groupL := map[string]string{"cluster": "DefaultCluster", "node_type": "broker", "node_id": c.b.name, "topic": topic, "consumer_group": group}
	eventually(t, 30*time.Second, "broker metrics after traffic", func() error {
		ss, err := scrapeMetrics(brokerURL)
		if err != nil {
			return err
		}
		in := copyWith(topicL, "message_type", "Normal")
		if v, err := one(ss, "rocketmq_messages_in_total", in); err != nil || v != n {
			return fmt.Errorf("messages in %v (%v), want %d", v, err, n)
		}
		if v, err := one(ss, "rocketmq_throughput_in_total", in); err != nil || v < n*10 {
			return fmt.Errorf("throughput in %v (%v), want >= %d bytes", v, err, n*10)
		}
		if v, err := one(ss, "rocketmq_message_size_count", in); err != nil || v != n {
			return fmt.Errorf("message size count %v (%v), want %d", v, err, n)
		}
		if v, err := one(ss, "rocketmq_messages_out_total", groupL); err != nil || v < n {
			return fmt.Errorf("messages out %v (%v), want >= %d", v, err, n)
		}
		if v, err := one(ss, "rocketmq_throughput_out_total", groupL); err != nil || v <= 0 {
			return fmt.Errorf("throughput out %v (%v), want > 0", v, err)
		}
		sends := 0.0
		for _, s := range find(ss, "rocketmq_rpc_latency_count", map[string]string{"protocol_type": "remoting", "response_code": "0"}) {
			if code := s.labels["request_code"]; code == "10" || code == "310" {
				sends += s.value
			}
		}
		if sends < n {
			return fmt.Errorf("rpc latency counts %v successful sends, want >= %d", sends, n)
		}
		// The Go client commits offsets every 5 s.
		if v, err := one(ss, "rocketmq_consumer_lag_messages", groupL); err != nil || v != 0 {
			return fmt.Errorf("consumer lag %v (%v), want 0 once everything is consumed", v, err)
		}
		return nil
	})

	// With the consumer gone, new messages are lag, and the oldest of them ages.
	pc.shutdown()
	sendSync(t, p, topic, "late", 5, nil)
	eventually(t, 30*time.Second, "consumer lag after more sends", func() error {
		ss, err := scrapeMetrics(brokerURL)
		if err != nil {
			return err
		}
		if v, err := one(ss, "rocketmq_consumer_lag_messages", groupL); err != nil || v != 5 {
			return fmt.Errorf("consumer lag %v (%v), want 5", v, err)
		}
		if v, err := one(ss, "rocketmq_consumer_lag_latency", groupL); err != nil || v <= 0 || v > 60000 {
			return fmt.Errorf("consumer lag latency %v ms (%v), want in (0, 60000]", v, err)
		}
		return nil
	})

	nsID := map[string]string{"node_type": "nameserver", "node_id": ns.addr}
	eventually(t, 20*time.Second, "name server metrics", func() error {
		ss, err := scrapeMetrics(nsURL)
		if err != nil {
			return err
		}
		if v, err := one(ss, "rocketmq_namesrv_brokers", nsID); err != nil || v != 1 {
			return fmt.Errorf("brokers %v (%v), want 1", v, err)
		}
		if v, err := one(ss, "rocketmq_namesrv_topics", nsID); err != nil || v < 2 {
			return fmt.Errorf("topics %v (%v), want >= 2", v, err)
		}
		for code, what := range map[string]string{"103": "REGISTER_BROKER", "105": "GET_ROUTEINFO_BY_TOPIC"} {
			l := copyWith(nsID, "request_code", code)
			l["response_code"] = "0"
			if v, err := one(ss, "rocketmq_rpc_latency_count", l); err != nil || v < 1 {
				return fmt.Errorf("%s requests %v (%v), want >= 1", what, v, err)
			}
		}
		return nil
	})
}

func copyWith(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}

// TestMetricsRaftGroup: on a three-node DLedger group every node reports its Raft figures with
// raft_group/raft_peer labels: one term, commit and applied indexes that reach the same value
// on all nodes after writes, exactly one leader, a leader change counted; after the leader is
// killed the new leader reports a second change and the failover's duration.
func TestMetricsRaftGroup(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	ports := map[string]int{} // dLegerSelfId → httpPort
	g := startRaftGroup(t, ns, 3, withHTTPPorts(t, ports))
	url := func(b *broker) string {
		return fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[b.props["dLegerSelfId"]])
	}
	leader := g.waitMaster(t, 30*time.Second, nil)
	topic := uniq("RaftMetrics")
	for i := range 10 {
		sendRawOK(t, leader.addr, topic, fmt.Sprintf("r-%d", i))
	}

	type raftFig struct{ term, commit, applied, changes, isLeader float64 }
	figures := func(b *broker) (raftFig, error) {
		ss, err := scrapeMetrics(url(b))
		if err != nil {
			return raftFig{}, err
		}
		l := map[string]string{"cluster": "DefaultCluster", "node_type": "broker", "node_id": g.name,
			"raft_group": g.name, "raft_peer": b.props["dLegerSelfId"]}
		var f raftFig
		for name, dst := range map[string]*float64{"rocketmq_raft_term": &f.term, "rocketmq_raft_commit_index": &f.commit,
			"rocketmq_raft_applied_index": &f.applied, "rocketmq_raft_leader_changes_total": &f.changes} {
			if *dst, err = one(ss, name, l); err != nil {
				return f, err
			}
		}
		if f.isLeader, err = one(ss, "rocketmq_raft_state", copyWith(l, "state", "Leader")); err != nil {
			return f, err
		}
		return f, nil
	}
	eventually(t, 20*time.Second, "raft metrics agree", func() error {
		var first raftFig
		leaders := 0.0
		for i, b := range g.nodes {
			f, err := figures(b)
			if err != nil {
				return fmt.Errorf("%s: %w", b.props["dLegerSelfId"], err)
			}
			if f.term < 1 || f.applied < 10 || f.applied > f.commit || f.changes < 1 {
				return fmt.Errorf("%s: %+v: want term >= 1, applied >= 10 and <= commit, >= 1 leader change", b.props["dLegerSelfId"], f)
			}
			if i == 0 {
				first = f
			} else if f.term != first.term || f.applied != first.applied {
				return fmt.Errorf("%s: %+v, n0: %+v: want the same term and applied index", b.props["dLegerSelfId"], f, first)
			}
			if (f.isLeader == 1) != (b == leader) {
				return fmt.Errorf("%s: leader state %v, registered master %s", b.props["dLegerSelfId"], f.isLeader, leader.addr)
			}
			leaders += f.isLeader
		}
		if leaders != 1 {
			return fmt.Errorf("%v nodes in state Leader", leaders)
		}
		return nil
	})

	leader.kill()
	start := time.Now()
	next := g.waitMaster(t, 30*time.Second, leader)
	took := time.Since(start)
	eventually(t, 20*time.Second, "new leader's failover figures", func() error {
		ss, err := scrapeMetrics(url(next))
		if err != nil {
			return err
		}
		l := map[string]string{"raft_group": g.name, "raft_peer": next.props["dLegerSelfId"]}
		if v, err := one(ss, "rocketmq_raft_leader_changes_total", l); err != nil || v < 2 {
			return fmt.Errorf("leader changes %v (%v), want >= 2", v, err)
		}
		if v, err := one(ss, "rocketmq_raft_last_failover_duration", l); err != nil || v <= 0 || v > float64((took+5*time.Second).Milliseconds()) {
			return fmt.Errorf("last failover %v ms (%v), want in (0, %v]", v, err, (took + 5*time.Second).Milliseconds())
		}
		if _, err := one(ss, "rocketmq_raft_apply_latency_count", l); err != nil {
			return err
		}
		return nil
	})
}
