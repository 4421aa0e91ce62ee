package integration

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// RocketMQ 4.x clients (the official Go client, unmodified) through mqproxy's remoting listener:
// the clients are given the proxies' remoting addresses as their name servers and nothing else.

// proxy4 is one mqproxy whose remoting listener serves 4.x clients.
type proxy4 struct {
	*proc
	remoting string
}

var remotingAddrRE = regexp.MustCompile(`remoting=(127\.0\.0\.1:\d+)`)

// startProxy4 starts mqproxy for ns with its gRPC and remoting listeners on free loopback ports
// and waits until the remoting one accepts.
func startProxy4(t testing.TB, ns *namesrv, extra ...string) *proxy4 {
	t.Helper()
	needBinaries(t)
	dir := t.TempDir()
	gport, rport := freePort(t), freePort(t)
	p := &proxy4{remoting: "127.0.0.1:" + strconv.Itoa(rport), proc: &proc{
		name: "mqproxy",
		bin:  filepath.Join(binDir, "mqproxy"),
		args: []string{"-n", ns.addr, "--grpcServerPort", strconv.Itoa(gport), "--listenHost", "127.0.0.1",
			"--remotingListenPort=" + strconv.Itoa(rport)},
		logPath: filepath.Join(dir, "mqproxy.log"),
	}}
	p.args = append(p.args, extra...)
	p.start(t)
	register(t, p.proc)
	eventually(t, 15*time.Second, "mqproxy remoting listener accepts", func() error {
		if err := p.exited(); err != nil {
			t.Fatal(err)
		}
		c, err := net.DialTimeout("tcp", p.remoting, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	return p
}

// viaProxies is c with its clients pointed at two fresh proxies' remoting listeners.
func viaProxies(t testing.TB, c *cluster) (*cluster, []*proxy4) {
	t.Helper()
	p1, p2 := startProxy4(t, c.ns), startProxy4(t, c.ns)
	return &cluster{ns: c.ns, b: c.b, via: []string{p1.remoting, p2.remoting}}, []*proxy4{p1, p2}
}

// proxy4Scenarios runs the basic scenarios through the proxies of pc: sync, async, oneway and
// batch sends; a clustering push consumer with a tag filter receiving exactly what matches.
func proxy4Scenarios(t *testing.T, pc *cluster) {
	topic := uniq("P4")
	p := newProducer(t, pc)
	first := sendSync(t, p, topic, "sync", 20, func(i int, m *primitive.Message) {
		if i%2 == 0 {
			m.WithTag("even")
		} else {
			m.WithTag("odd")
		}
	})
	want := map[string]bool{}
	for i, s := range first {
		if i%2 == 0 {
			want[s.body] = true
		}
	}
	// Async.
	var wg sync.WaitGroup
	var asyncErr atomic.Value
	for i := range 10 {
		wg.Add(1)
		body := fmt.Sprintf("async-%d", i)
		want[body] = true
		err := p.SendAsync(context.Background(), func(_ context.Context, r *primitive.SendResult, err error) {
			defer wg.Done()
			if err == nil && r.Status != primitive.SendOK {
				err = fmt.Errorf("status %d", r.Status)
			}
			if err != nil {
				asyncErr.Store(err)
			}
		}, primitive.NewMessage(topic, []byte(body)).WithTag("even"))
		if err != nil {
			t.Fatalf("SendAsync: %v", err)
		}
	}
	waitGroup(t, &wg, 20*time.Second, "async sends answered")
	if e := asyncErr.Load(); e != nil {
		t.Fatalf("async send through the proxy: %v", e)
	}
	// Oneway.
	for i := range 5 {
		body := fmt.Sprintf("oneway-%d", i)
		want[body] = true
		if err := p.SendOneWay(context.Background(), primitive.NewMessage(topic, []byte(body)).WithTag("even")); err != nil {
			t.Fatalf("SendOneWay: %v", err)
		}
	}
	// Batch.
	var batch []*primitive.Message
	for i := range 5 {
		body := fmt.Sprintf("batch-%d", i)
		want[body] = true
		batch = append(batch, primitive.NewMessage(topic, []byte(body)).WithTag("even"))
	}
	if r, err := p.SendSync(context.Background(), batch...); err != nil || r.Status != primitive.SendOK {
		t.Fatalf("batch send through the proxy: %v %v", r, err)
	}
	// Every proxy names itself as the group's only member.
	for _, px := range pc.via {
		addrs, err := routeAddrs(px, topic)
		if err != nil {
			t.Fatal(err)
		}
		if len(addrs) != 1 || addrs[0] != px {
			t.Fatalf("route of %s from the proxy at %s: %v, want {0: %s}", topic, px, addrs, px)
		}
	}
	// mqadmin given a proxy as its name server sees the cluster and the topic, at the proxy.
	adminVia := &cluster{ns: &namesrv{addr: pc.via[0]}}
	if out := runAdmin(t, adminVia, "clusterList"); !strings.Contains(out, pc.via[0]) {
		t.Errorf("mqadmin clusterList through %s does not show it:\n%s", pc.via[0], out)
	}
	if out := runAdmin(t, adminVia, "topicList"); !strings.Contains(out, topic) {
		t.Errorf("mqadmin topicList through %s does not show %s:\n%s", pc.via[0], topic, out)
	}
	if out := runAdmin(t, adminVia, "topicRoute", "-t", topic); !strings.Contains(out, pc.via[0]) {
		t.Errorf("mqadmin topicRoute through %s does not name it:\n%s", pc.via[0], out)
	}
	cons := startPushConsumer(t, pc, uniq("GP4"), topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "even"})
	eventually(t, 60*time.Second, "the push consumer receives every even message", func() error {
		seen := map[string]bool{}
		for _, m := range cons.got.snapshot() {
			if m.GetTags() != "even" {
				t.Fatalf("tag filter: received %q with tag %q", m.Body, m.GetTags())
			}
			seen[string(m.Body)] = true
		}
		var missing []string
		for b := range want {
			if !seen[b] {
				missing = append(missing, b)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%d of %d not received: %s", len(missing), len(want), firstFew(missing))
		}
		return nil
	})
}

// TestProxy4Classic: a classic broker behind two proxies.
func TestProxy4Classic(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	pc, _ := viaProxies(t, c)
	proxy4Scenarios(t, pc)
}

// TestProxy4RaftGroup: a three-node group behind two proxies.
func TestProxy4RaftGroup(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	leader := g.waitMaster(t, 20*time.Second, nil)
	pc, _ := viaProxies(t, g.asCluster(leader))
	proxy4Scenarios(t, pc)
}

// joinAddrs is the ';'-separated name server list of pc's clients.
func joinAddrs(pc *cluster) string { return strings.Join(pc.via, ";") }

// TestProxy4ACL: name server and broker with ACL on, behind two proxies that have an account of
// their own only for their own questions to the name server. A 4.x client's signature passes
// through the proxy unchanged: with the right credentials it produces and consumes; a wrong
// secret, no credentials or a denied topic are refused exactly as when talking to the broker.
func TestProxy4ACL(t *testing.T) {
	t.Parallel()
	file := writeACLFile(t)
	ns := startNamesrv(t, "--aclEnable=true", "--aclConfigFile="+file)
	b := startBroker(t, ns, aclBrokerOpts(file)...)
	p1 := startProxy4(t, ns, "--accessKey="+aclAdminAK, "--secretKey="+aclAdminSK)
	p2 := startProxy4(t, ns, "--accessKey="+aclAdminAK, "--secretKey="+aclAdminSK)
	pc := &cluster{ns: ns, b: b, via: []string{p1.remoting, p2.remoting}}
	topic := uniq("P4Acl")
	creds := primitive.Credentials{AccessKey: aclAppAK, SecretKey: aclAppSK}
	p := newProducer(t, pc, producer.WithCredentials(creds))
	want := sendSync(t, p, topic, "acl", 5, nil)
	cons := startPushConsumer(t, pc, uniq("P4AclGroup"), topic, consumer.MessageSelector{}, consumer.WithCredentials(creds))
	eventually(t, 30*time.Second, "consumer with credentials gets every message through the proxies", func() error {
		if d := diffBodies(bodies(want), cons.got.snapshot()); len(d.missing) > 0 {
			return fmt.Errorf("missing %v", d.missing)
		}
		return nil
	})
	refused := func(name, topic, want string, opts ...producer.Option) {
		t.Helper()
		bad := newProducer(t, pc, append(opts, producer.WithRetry(0))...)
		_, err := bad.SendSync(context.Background(), primitive.NewMessage(topic, []byte("nope")))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: send through the proxies not refused with %q: %v", name, want, err)
		}
		t.Logf("%s refused: %v", name, err)
	}
	refused("wrong secret", topic, "16", producer.WithCredentials(primitive.Credentials{AccessKey: aclAppAK, SecretKey: "wrong-secret-123"}))
	refused("no credentials", topic, "16")
	refused("denied topic", aclDeniedT, "no PUB permission on topic", producer.WithCredentials(creds))
}
