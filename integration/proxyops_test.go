package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

// Operations of mqproxy on real processes: its configuration (-pc rmq-proxy.json and
// --key=value flags), /metrics, the connection log lines, a graceful SIGTERM with clients
// connected, ACL, and the proxy inside a broker (mqbroker --enable-proxy).

// startProxyWith starts mqproxy for ns on a free loopback port with extra flags and waits until
// it accepts.
func startProxyWith(t testing.TB, ns *namesrv, extra ...string) *mqproxy {
	t.Helper()
	needBinaries(t)
	dir := t.TempDir()
	port := freePort(t)
	p := &mqproxy{addr: "127.0.0.1:" + strconv.Itoa(port), proc: &proc{
		name:    "mqproxy",
		bin:     filepath.Join(binDir, "mqproxy"),
		args:    append([]string{"-n", ns.addr, "--grpcServerPort", strconv.Itoa(port), "--listenHost", "127.0.0.1"}, extra...),
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

// newV5SimpleConsumer starts an official 5.x SimpleConsumer of topic in group through addr.
func newV5SimpleConsumer(t testing.TB, addr, group, topic string, creds *credentials.SessionCredentials) rmq.SimpleConsumer {
	t.Helper()
	if creds == nil {
		creds = &credentials.SessionCredentials{}
	}
	c, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: addr, ConsumerGroup: group, Credentials: creds},
		rmq.WithAwaitDuration(3*time.Second), rmq.WithSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatalf("5.x simple consumer start through %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.GracefulStop() })
	// A group's first receive starts it at the queues' end (as Apache's proxy): messages sent
	// from now on are the group's.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = c.Receive(ctx, 16, 10*time.Second)
	return c
}

// receiveAll receives and acks until every body of want arrived or the deadline passes.
func receiveAll(t testing.TB, c rmq.SimpleConsumer, want map[string]bool, within time.Duration) {
	t.Helper()
	got := map[string]bool{}
	deadline := time.Now().Add(within)
	for len(got) < len(want) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		mvs, _ := c.Receive(ctx, 16, 20*time.Second)
		cancel()
		for _, mv := range mvs {
			got[string(mv.GetBody())] = true
			if err := c.Ack(context.Background(), mv); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
	}
	for b := range want {
		if !got[b] {
			t.Fatalf("received %d of %d messages; %q missing", len(got), len(want), b)
		}
	}
}

// runProxy runs mqproxy to its exit (a configuration that must not start) and returns its output.
func runProxy(t *testing.T, args ...string) (string, error) {
	t.Helper()
	needBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "mqproxy"), args...).CombinedOutput()
	return string(out), err
}

// TestProxyConfigKeys: a bad key or value, in -pc rmq-proxy.json or as a flag, stops mqproxy with
// an error naming the key; a good file is read (its port used), and flags override it.
func TestProxyConfigKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(body string) string {
		p := filepath.Join(dir, uniq("rmq-proxy")+".json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		args []string
		key  string
	}{
		{[]string{"-pc", file(`{"namesrvAddr": "127.0.0.1:9876", "grpcServerPort": "eighty"}`)}, "grpcServerPort"},
		{[]string{"-pc", file(`{"namesrvAddr": "127.0.0.1:9876", "remotingListenPort": 8080}`)}, "remotingListenPort"},
		{[]string{"-n", "127.0.0.1:9876", "--aclEnable=perhaps"}, "aclEnable"},
		{[]string{"-n", "127.0.0.1:9876", "--metricsExporterType=STATSD"}, "metricsExporterType"},
		{[]string{"-n", "127.0.0.1:9876", "--aclEnable=true"}, "aclConfigFile"},
		{[]string{"-n", "127.0.0.1:9876", "--grpcServerPort=70000"}, "grpcServerPort"},
		{[]string{"--grpcServerPort=0"}, "namesrvAddr"},
	} {
		out, err := runProxy(t, tc.args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(out, tc.key) {
			t.Fatalf("mqproxy %v: exit %v, output %q: want a failed start naming %s", tc.args, err, out, tc.key)
		}
		t.Logf("mqproxy %v: %s", tc.args, strings.TrimSpace(out))
	}

	// A good file: its keys are used, a flag overrides one of them.
	ns := startNamesrv(t)
	port, other := freePort(t), freePort(t)
	pc := file(fmt.Sprintf(`{"namesrvAddr": %q, "grpcServerPort": %d, "listenHost": "127.0.0.1", "rocketMQClusterName": "DefaultCluster",
		"metricsExporterType": "PROM", "metricsPromExporterPort": %d, "metricsPromExporterHost": "127.0.0.1"}`, "127.0.0.1:1", port, other))
	px := &mqproxy{addr: "127.0.0.1:" + strconv.Itoa(port), proc: &proc{name: "mqproxy", bin: filepath.Join(binDir, "mqproxy"),
		args: []string{"-pc", pc, "-n", ns.addr}, logPath: filepath.Join(dir, "mqproxy.log")}}
	px.start(t)
	register(t, px.proc)
	eventually(t, 15*time.Second, "mqproxy from -pc serves gRPC and /metrics", func() error {
		if err := px.exited(); err != nil {
			t.Fatal(err)
		}
		if _, err := scrapeMetrics(fmt.Sprintf("http://127.0.0.1:%d/metrics", other)); err != nil {
			return err
		}
		c, err := net.DialTimeout("tcp", px.addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	if !logContains(&broker{proc: px.proc}, "namesrv="+ns.addr) {
		t.Fatalf("-n did not override the file's namesrvAddr:\n%s", tail(px.logPath, 2048))
	}
}

// TestProxyGracefulSIGTERM: with a 5.x producer sending from several goroutines and a
// SimpleConsumer's long poll open, mqproxy gets SIGTERM: it exits 0 within a few seconds, every
// send that was under way when the signal came succeeded (no transport error), the long poll
// ended promptly without a transport error. Before that, /metrics showed the calls
// (rocketmq_rpc_latency, messages in and out) and the log had a line per connection.
func TestProxyGracefulSIGTERM(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	c := &cluster{ns: ns, b: startBroker(t, ns)}
	topic, group, busy := uniq("ProxyTerm"), uniq("GProxyTerm"), uniq("ProxyTermBusy")
	p4 := newProducer(t, c)
	sendFirst(t, p4, topic, "create-topic")
	sendFirst(t, p4, busy, "create-topic") // the live sends go here, away from the long poll
	mport := freePort(t)
	px := startProxyWith(t, ns, "--metricsExporterType=PROM", "--metricsPromExporterPort="+strconv.Itoa(mport), "--grpcShutdownTimeSeconds=10")
	p := newV5Producer(t, px.addr, topic)
	cons := newV5SimpleConsumer(t, px.addr, group, topic, nil)
	want := map[string]bool{}
	for i := 0; i < 10; i++ {
		b := fmt.Sprintf("term-%d", i)
		want[b] = true
		if _, err := p.Send(context.Background(), &rmq.Message{Topic: topic, Body: []byte(b)}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	receiveAll(t, cons, want, 60*time.Second)

	ss, err := scrapeMetrics(fmt.Sprintf("http://127.0.0.1:%d/metrics", mport))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"rocketmq_rpc_latency_count", map[string]string{"protocol_type": "grpc", "action": "SendMessage", "result": "OK", "node_type": "proxy"}, 10},
		{"rocketmq_rpc_latency_count", map[string]string{"protocol_type": "grpc", "action": "AckMessage", "result": "OK"}, 10},
		{"rocketmq_messages_in_total", map[string]string{"topic": topic, "message_type": "Normal"}, 10},
		{"rocketmq_messages_out_total", map[string]string{"topic": topic, "consumer_group": group}, 10},
		{"rocketmq_throughput_in_total", map[string]string{"topic": topic}, 10 * float64(len("term-0"))},
		{"rocketmq_proxy_grpc_connections", nil, 1},
	} {
		v, err := one(ss, w.name, w.labels)
		if err != nil || v < w.min {
			t.Fatalf("/metrics %s%v = %v (%v), want >= %v", w.name, w.labels, v, err, w.min)
		}
	}

	// The long poll: open when the signal comes.
	polled := make(chan error, 1)
	var pollEnd time.Time
	pollStart := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := cons.Receive(ctx, 16, 20*time.Second)
		pollEnd = time.Now()
		polled <- err
	}()
	// Senders of 256 KiB messages: each records when its sends started and how they ended, and
	// shows the start of the send it has under way (0: none).
	type result struct {
		start, end time.Time
		err        error
	}
	var mu sync.Mutex
	var results []result
	var current [4]atomic.Int64
	sendCtx, stopSends := context.WithCancel(context.Background())
	big := strings.Repeat("x", 256<<10)
	for g := range current {
		go func(g int) {
			for i := 0; sendCtx.Err() == nil; i++ {
				start := time.Now()
				current[g].Store(start.UnixNano())
				ctx, cancel := context.WithTimeout(sendCtx, 10*time.Second)
				_, err := p.Send(ctx, &rmq.Message{Topic: busy, Body: []byte(fmt.Sprintf("live-%d-%d-%s", g, i, big))})
				cancel()
				current[g].Store(0)
				mu.Lock()
				results = append(results, result{start, time.Now(), err})
				mu.Unlock()
				if err != nil {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}(g)
	}
	time.Sleep(1500 * time.Millisecond) // sends flowing, the poll parked at the broker
	// Signal while a send begun at least a millisecond ago is under way.
	eventually(t, 10*time.Second, "a send under way for 1 ms", func() error {
		for i := range current {
			if st := current[i].Load(); st != 0 && time.Since(time.Unix(0, st)) > time.Millisecond {
				return nil
			}
		}
		return errors.New("no send under way")
	})
	term := time.Now()
	if !px.signalAndWait(syscall.SIGTERM, 15*time.Second) {
		t.Fatal("mqproxy still running 15 s after SIGTERM")
	}
	exited := time.Since(term)
	// The sends under way at the signal end at once (answered); those begun later keep
	// retrying against the stopped proxy and are not waited for.
	stopSends()
	eventually(t, 10*time.Second, "the sends begun before SIGTERM ended", func() error {
		for i := range current {
			if st := current[i].Load(); st != 0 && st < term.UnixNano() {
				return fmt.Errorf("sender %d still sending since %v", i, time.Unix(0, st))
			}
		}
		return nil
	})
	mu.Lock()
	done := slices.Clone(results)
	mu.Unlock()
	if err := px.exited(); !strings.Contains(err.Error(), "exited (<nil>)") {
		t.Fatalf("mqproxy did not exit 0: %v", err)
	}
	if exited > 5*time.Second {
		t.Fatalf("mqproxy took %v to exit after SIGTERM", exited)
	}
	var before, inFlight int
	for _, r := range done {
		// Sends begun before the signal (less a millisecond for the client to put them on the
		// wire) were accepted by the proxy before it stopped accepting: each must succeed.
		if r.start.After(term.Add(-time.Millisecond)) {
			continue
		}
		before++
		if r.end.After(term) {
			inFlight++
		}
		if r.err != nil {
			t.Fatalf("a send begun %v before SIGTERM failed: %v", term.Sub(r.start), r.err)
		}
	}
	if inFlight == 0 {
		t.Fatal("no send was under way at SIGTERM: the test proved nothing about in-flight calls")
	}
	var pollErr error
	select {
	case pollErr = <-polled:
	case <-time.After(5 * time.Second):
		t.Fatalf("the long poll begun %v before SIGTERM was still open 5 s after it", term.Sub(pollStart))
	}
	if pollEnd.Before(term) {
		t.Fatalf("the long poll ended (%v) before SIGTERM", pollErr)
	}
	var rpcErr *rmq.ErrRpcStatus
	if pollErr != nil && !errors.As(pollErr, &rpcErr) {
		t.Fatalf("the long poll ended with a transport error: %v", pollErr)
	}
	for _, line := range []string{"client connected", "client identified", "client disconnected"} {
		if !logContains(&broker{proc: px.proc}, line) {
			t.Fatalf("the proxy's log has no %q line", line)
		}
	}
	t.Logf("proxy SIGTERM: exit 0 after %v; %d sends begun before the signal all succeeded (%d still in flight at it); the long poll open since %v ended %v after the signal with %v",
		exited.Round(time.Millisecond), before, inFlight, term.Sub(pollStart).Round(time.Millisecond), pollEnd.Sub(term).Round(time.Millisecond), pollErr)
}

// TestProxyACL: name server, broker and proxy with ACL on and one plain_acl.yml. The proxy signs
// its requests to the brokers with its admin account; a 5.x client with the application's
// credentials sends and receives through it; a wrong secret gets an in-band UNAUTHORIZED naming
// the signature, a topic the account may not use FORBIDDEN.
func TestProxyACL(t *testing.T) {
	t.Parallel()
	file := writeACLFile(t)
	ns := startNamesrv(t, "--aclEnable=true", "--aclConfigFile="+file)
	c := &cluster{ns: ns, b: startBroker(t, ns, aclBrokerOpts(file)...)}
	topic, group := uniq("ProxyAcl"), uniq("GProxyAcl")
	creds4 := primitive.Credentials{AccessKey: aclAppAK, SecretKey: aclAppSK}
	sendFirst(t, newProducer(t, c, producer.WithCredentials(creds4)), topic, "create-topic")
	px := startProxyWith(t, ns, "--aclEnable=true", "--aclConfigFile="+file, "--accessKey="+aclAdminAK, "--secretKey="+aclAdminSK)

	good := &credentials.SessionCredentials{AccessKey: aclAppAK, AccessSecret: aclAppSK}
	p, err := rmq.NewProducer(&rmq.Config{Endpoint: px.addr, Credentials: good}, rmq.WithTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("producer with the right credentials: %v", err)
	}
	defer p.GracefulStop()
	cons := newV5SimpleConsumer(t, px.addr, group, topic, good)
	want := map[string]bool{}
	for i := 0; i < 5; i++ {
		b := fmt.Sprintf("acl-%d", i)
		want[b] = true
		if _, err := p.Send(context.Background(), &rmq.Message{Topic: topic, Body: []byte(b)}); err != nil {
			t.Fatalf("send %d with the right credentials: %v", i, err)
		}
	}
	receiveAll(t, cons, want, 60*time.Second)

	// A topic the account may not use: FORBIDDEN, in-band.
	_, err = p.Send(context.Background(), &rmq.Message{Topic: aclDeniedT, Body: []byte("x")})
	var st *rmq.ErrRpcStatus
	if !errors.As(err, &st) || st.Code != 40300 || !strings.Contains(st.Message, aclDeniedT) {
		t.Fatalf("send to a DENY topic: %v, want in-band FORBIDDEN (40300) naming it", err)
	}
	t.Logf("DENY topic: %v", err)

	// A wrong secret: UNAUTHORIZED, in-band, saying why.
	bad, err := rmq.NewProducer(&rmq.Config{Endpoint: px.addr, Credentials: &credentials.SessionCredentials{AccessKey: aclAppAK, AccessSecret: "wrong-secret-123"}}, rmq.WithTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	err = bad.Start()
	if err == nil {
		defer bad.GracefulStop()
		_, err = bad.Send(context.Background(), &rmq.Message{Topic: topic, Body: []byte("nope")})
	}
	// The client's Start wraps the in-band status of its first QueryRoute in text.
	if err == nil || !strings.Contains(err.Error(), "UNAUTHORIZED") || !strings.Contains(err.Error(), "signature mismatch") {
		t.Fatalf("wrong secret: %v, want in-band UNAUTHORIZED (40100) saying the signature does not match", err)
	}
	t.Logf("wrong secret: %v", err)
}

// TestProxyLocalMode: a classic broker started with --enable-proxy serves RocketMQ 5 clients on
// its grpcServerPort; a 5.x producer and SimpleConsumer send and receive through it, and the
// proxy's metrics, turned on by the broker's proxyConfigPath file, count them.
func TestProxyLocalMode(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	gport, mport := freePort(t), freePort(t)
	pc := filepath.Join(t.TempDir(), "rmq-proxy.json")
	if err := os.WriteFile(pc, []byte(fmt.Sprintf(`{"metricsExporterType": "PROM", "metricsPromExporterPort": %d}`, mport)), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, ns, withFlag("enable-proxy", "true"), withProp("grpcServerPort", strconv.Itoa(gport)), withProp("proxyConfigPath", pc))
	addr := "127.0.0.1:" + strconv.Itoa(gport)
	topic, group := uniq("ProxyLocal"), uniq("GProxyLocal")
	sendFirst(t, newProducer(t, &cluster{ns: ns, b: b}), topic, "create-topic")
	eventually(t, 15*time.Second, "the local proxy accepts", func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	p := newV5Producer(t, addr, topic)
	cons := newV5SimpleConsumer(t, addr, group, topic, nil)
	want := map[string]bool{}
	for i := 0; i < 10; i++ {
		body := fmt.Sprintf("local-%d", i)
		want[body] = true
		if _, err := p.Send(context.Background(), &rmq.Message{Topic: topic, Body: []byte(body)}); err != nil {
			t.Fatalf("send %d through the local proxy: %v", i, err)
		}
	}
	receiveAll(t, cons, want, 60*time.Second)
	if !logContains(b, "local mode") {
		t.Fatal("the broker's output does not announce the local proxy")
	}
	ss, err := scrapeMetrics(fmt.Sprintf("http://127.0.0.1:%d/metrics", mport))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := one(ss, "rocketmq_messages_in_total", map[string]string{"topic": topic, "node_type": "proxy"}); err != nil || v != 10 {
		t.Fatalf("local proxy's rocketmq_messages_in_total for %s: %v (%v), want 10", topic, v, err)
	}
}
