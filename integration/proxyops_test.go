package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
		args:    append([]string{"-n", ns.addr, "--grpcServerPort", strconv.Itoa(port), "--listenHost", "127.0.0.1", "--remotingListenPort=0"}, extra...),
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
		{[]string{"-pc", file(`{"namesrvAddr": "127.0.0.1:9876", "remotingListenPort": 70000}`)}, "remotingListenPort"},
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
	pc := file(fmt.Sprintf(`{"namesrvAddr": %q, "grpcServerPort": %d, "listenHost": "127.0.0.1", "rocketMQClusterName": "DefaultCluster", "remotingListenPort": 0,
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

// TestProxyGracefulSIGTERM: mqproxy gets SIGTERM while a SimpleConsumer's long poll is open and
// eight sends of a 5.x producer wait in it for a frozen (SIGSTOP) broker. The long poll ends at
// once without a transport error; the proxy stays up until the sends are answered (all OK once
// the broker thaws), then exits 0 within seconds. Before that, /metrics showed the calls
// (rocketmq_rpc_latency, messages in and out) and the log had a line per connection.
func TestProxyGracefulSIGTERM(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	c := &cluster{ns: ns, b: startBroker(t, ns)}
	topic, group, busy := uniq("ProxyTerm"), uniq("GProxyTerm"), uniq("ProxyTermBusy")
	p4 := newProducer(t, c)
	createTopicBySend(t, c.ns.addr, p4, topic, "create-topic")
	createTopicBySend(t, c.ns.addr, p4, busy, "create-topic") // the live sends go here, away from the long poll
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
	// The producer learns busy's route (and the proxy its config) before the broker freezes, so
	// the sends below are SendMessage calls in flight, not route lookups waiting on the broker.
	if _, err := p.Send(context.Background(), &rmq.Message{Topic: busy, Body: []byte("warm-up")}); err != nil {
		t.Fatalf("warm-up send to %s: %v", busy, err)
	}

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
	type ended struct {
		at  time.Time
		err error
	}
	polled := make(chan ended, 1)
	pollStart := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := cons.Receive(ctx, 16, 20*time.Second)
		polled <- ended{time.Now(), err}
	}()
	time.Sleep(500 * time.Millisecond) // the poll parked at the broker

	// Sends in flight at the signal: with the broker frozen they reach the proxy and wait there
	// for its answer.
	c.b.signal(t, syscall.SIGSTOP)
	frozen := true
	defer func() {
		if frozen {
			c.b.signal(t, syscall.SIGCONT)
		}
	}()
	const inFlight = 8
	sends := make(chan ended, inFlight)
	for i := 0; i < inFlight; i++ {
		go func(i int) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			_, err := p.Send(ctx, &rmq.Message{Topic: busy, Body: []byte(fmt.Sprintf("in-flight-%d", i))})
			sends <- ended{time.Now(), err}
		}(i)
	}
	time.Sleep(time.Second) // every send is at the proxy, waiting on the frozen broker
	term := time.Now()
	if px.signalAndWait(syscall.SIGTERM, 500*time.Millisecond) {
		t.Fatal("mqproxy exited with sends in flight instead of letting them finish")
	}
	var pe ended
	select {
	case pe = <-polled:
	case <-time.After(3 * time.Second):
		t.Fatalf("the long poll begun %v before SIGTERM was still open 3 s after it", term.Sub(pollStart))
	}
	if pe.at.Before(term) {
		t.Fatalf("the long poll ended (%v) before SIGTERM", pe.err)
	}
	var rpcErr *rmq.ErrRpcStatus
	if pe.err != nil && !errors.As(pe.err, &rpcErr) {
		t.Fatalf("the long poll ended with a transport error: %v", pe.err)
	}
	thawed := time.Now()
	c.b.signal(t, syscall.SIGCONT)
	frozen = false
	for i := 0; i < inFlight; i++ {
		select {
		case r := <-sends:
			if r.err != nil {
				t.Fatalf("a send in flight at SIGTERM failed: %v", r.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of the %d sends in flight at SIGTERM unanswered 10 s after the broker thawed", inFlight-i, inFlight)
		}
	}
	if !px.signalAndWait(syscall.Signal(0), 10*time.Second) {
		t.Fatal("mqproxy still running 10 s after its last call in flight was answered")
	}
	exited := time.Since(thawed)
	if err := px.exited(); !strings.Contains(err.Error(), "exited (<nil>)") {
		t.Fatalf("mqproxy did not exit 0: %v", err)
	}
	if exited > 5*time.Second {
		t.Fatalf("mqproxy took %v to exit after its calls in flight could finish", exited)
	}
	for _, line := range []string{"client connected", "client identified", "client disconnected"} {
		if !logContains(&broker{proc: px.proc}, line) {
			t.Fatalf("the proxy's log has no %q line", line)
		}
	}
	t.Logf("proxy SIGTERM: the long poll open for %v ended %v after the signal with %v; %d sends in flight (broker frozen) all answered OK once it thawed %v after the signal; exit 0 %v after that",
		term.Sub(pollStart).Round(time.Millisecond), pe.at.Sub(term).Round(time.Millisecond), pe.err, inFlight,
		thawed.Sub(term).Round(time.Millisecond), exited.Round(time.Millisecond))
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
	createTopicBySend(t, c.ns.addr, newProducer(t, c, producer.WithCredentials(creds4)), topic, "create-topic")
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
	createTopicBySend(t, ns.addr, newProducer(t, &cluster{ns: ns, b: b}), topic, "create-topic")
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
