package integration

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The official RocketMQ 5 Go client (v5.1.2) always dials TLS. The proxy serves TLS and
// plaintext on one port; most tests here dial plaintext through this wrapper of the client's
// exported connection hook (as an application that turns TLS off would); addresses in tlsTargets
// keep the client's own TLS dialing (TestProxyV5OverTLS). Addresses in dialTimeouts get that
// dial timeout instead of the client's 5 s (TestProxyTwoProxiesKill), through the same hook.
var tlsTargets, dialTimeouts sync.Map

func init() {
	dial := rmq.NewRpcClient
	rmq.NewRpcClient = func(target string, opts ...rmq.RpcClientOption) (rmq.RpcClient, error) {
		useTLS := false
		tlsTargets.Range(func(k, _ any) bool {
			useTLS = useTLS || strings.Contains(target, k.(string))
			return !useTLS
		})
		if !useTLS {
			opts = append(opts, rmq.WithRpcClientConnOption(rmq.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))))
		}
		if d, ok := dialTimeouts.Load(target); ok {
			opts = append(opts, rmq.WithRpcClientConnOption(rmq.WithDialTimeout(d.(time.Duration))))
		}
		return dial(target, opts...)
	}
}

// mqproxy is a running proxy process.
type mqproxy struct {
	*proc
	addr string
}

// startProxy starts mqproxy for ns on a free loopback port and waits until it accepts.
func startProxy(t testing.TB, ns *namesrv) *mqproxy {
	t.Helper()
	needBinaries(t)
	dir := t.TempDir()
	port := freePort(t)
	p := &mqproxy{addr: "127.0.0.1:" + strconv.Itoa(port), proc: &proc{
		name:    "mqproxy",
		bin:     filepath.Join(binDir, "mqproxy"),
		args:    []string{"-n", ns.addr, "--grpcServerPort", strconv.Itoa(port), "--listenHost", "127.0.0.1", "--remotingListenPort=0"},
		logPath: filepath.Join(dir, "mqproxy.log"),
	}}
	p.start(t)
	register(t, p.proc)
	eventually(t, 15*time.Second, "mqproxy accepts", func() error {
		if err := p.exited(); err != nil {
			t.Fatal(err)
		}
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	return p
}

// newV5Producer starts an official 5.x producer of topic through the proxy at addr.
func newV5Producer(t testing.TB, addr, topic string) rmq.Producer {
	t.Helper()
	p, err := rmq.NewProducer(&rmq.Config{Endpoint: addr, Credentials: &credentials.SessionCredentials{}}, rmq.WithTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("5.x producer start through %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = p.GracefulStop() })
	return p
}

// TestProxyV5SimpleConsumer: through mqproxy, the official 5.x SimpleConsumer receives what the
// 5.x producer sent to a three-node group (tag, keys, properties intact), acks it, and a message
// whose invisibility it shortened with ChangeInvisibleDuration instead of acking is delivered
// again with delivery attempt 2.
func TestProxyV5SimpleConsumer(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	g.waitMaster(t, 20*time.Second, nil)
	topic, group := uniq("ProxyV5C"), uniq("GProxyV5")
	sendFirst(t, newProducer(t, &cluster{ns: ns}), topic, "create-topic")
	px := startProxy(t, ns)
	c, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: px.addr, ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}},
		rmq.WithAwaitDuration(3*time.Second), rmq.WithSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("5.x simple consumer start through %s: %v", px.addr, err)
	}
	t.Cleanup(func() { _ = c.GracefulStop() })
	receive := func() []*rmq.MessageView {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		mvs, _ := c.Receive(ctx, 16, 10*time.Second) // MESSAGE_NOT_FOUND is an error: nothing new
		return mvs
	}
	receive() // the group starts where the queues end now (as Apache's proxy: initMode MAX)

	p := newV5Producer(t, px.addr, topic)
	const n = 20
	for i := 0; i < n; i++ {
		msg := &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("c-%02d", i))}
		msg.SetTag("TagC")
		msg.SetKeys(fmt.Sprintf("ck-%d", i))
		msg.AddProperty("seq", strconv.Itoa(i))
		if _, err := p.Send(context.Background(), msg); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	got := map[string]int32{}
	var retried string
	deadline := time.Now().Add(60 * time.Second)
	for (len(got) < n || got[retried] < 2) && time.Now().Before(deadline) {
		for _, mv := range receive() {
			body := string(mv.GetBody())
			seq := mv.GetProperties()["seq"]
			if mv.GetTag() == nil || *mv.GetTag() != "TagC" || len(mv.GetKeys()) != 1 || mv.GetKeys()[0] != "ck-"+seq || "c-"+fmt.Sprintf("%02s", seq) != body {
				t.Fatalf("message %q: tag %v keys %v properties %v", body, mv.GetTag(), mv.GetKeys(), mv.GetProperties())
			}
			got[body] = max(got[body], mv.GetDeliveryAttempt())
			if retried == "" {
				retried = body // not acked: seen again after its invisibility runs out
				if err := c.ChangeInvisibleDuration(mv, time.Second); err != nil {
					t.Fatalf("ChangeInvisibleDuration: %v", err)
				}
				continue
			}
			if err := c.Ack(context.Background(), mv); err != nil {
				t.Fatalf("ack %s: %v", body, err)
			}
		}
	}
	if len(got) != n {
		t.Fatalf("received %d of %d messages: %v", len(got), n, got)
	}
	if got[retried] != 2 {
		t.Fatalf("%s, whose invisibility was shortened, was delivered %d time(s), want a second delivery (attempt 2)", retried, got[retried])
	}
	t.Logf("proxy: the 5.x simple consumer received all %d messages, %s again with delivery attempt 2 after ChangeInvisibleDuration", n, retried)

	// A DELAY message: not delivered before its time, and soon after it.
	due := time.Now().Add(3 * time.Second).Truncate(time.Millisecond)
	delayed := &rmq.Message{Topic: topic, Body: []byte("delayed")}
	delayed.SetDelayTimestamp(due)
	if _, err := p.Send(context.Background(), delayed); err != nil {
		t.Fatalf("send a DELAY message: %v", err)
	}
	var at time.Time
	for at.IsZero() && time.Now().Before(due.Add(30*time.Second)) {
		for _, mv := range receive() {
			if string(mv.GetBody()) != "delayed" {
				continue
			}
			at = time.Now()
			if err := c.Ack(context.Background(), mv); err != nil {
				t.Fatal(err)
			}
		}
	}
	if at.IsZero() {
		t.Fatal("the DELAY message never arrived")
	}
	if at.Before(due) {
		t.Fatalf("the DELAY message arrived %v before its time", due.Sub(at))
	}
	// Generous for a loaded CI machine; the broker's timer is at most one 1 s level late.
	if late := at.Sub(due); late > 3*time.Second {
		t.Fatalf("the DELAY message arrived %v after its time", late)
	}
	t.Logf("proxy: the DELAY message arrived %v after its delivery time", at.Sub(due).Round(time.Millisecond))
}

// TestProxyV5OverTLS: the official 5.x producer as it comes, dialing TLS (its default, with
// certificate verification off), sends through the proxy's self-signed TLS on the same port that
// serves the other tests in plaintext.
func TestProxyV5OverTLS(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	c := &cluster{ns: ns, b: startBroker(t, ns)}
	topic := uniq("ProxyTLS")
	sendFirst(t, newProducer(t, c), topic, "create-topic")
	px := startProxy(t, ns)
	tlsTargets.Store(px.addr, true) // clients of this proxy keep their own TLS dialing
	p, err := rmq.NewProducer(&rmq.Config{Endpoint: px.addr, Credentials: &credentials.SessionCredentials{}}, rmq.WithTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("5.x producer over TLS: %v", err)
	}
	defer p.GracefulStop()
	for i := 0; i < 10; i++ {
		if _, err := p.Send(context.Background(), &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("tls-%d", i))}); err != nil {
			t.Fatalf("send %d over TLS: %v", i, err)
		}
	}
	if !logContains(&broker{proc: px.proc}, "TLS and plaintext") {
		t.Fatal("the proxy's log does not say it serves TLS")
	}
}
