package integration

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"rocketraft/internal/testcert"
)

// tlsAddrs are the remoting addresses started with TLS on (tls.server.mode permissive or
// enforcing): the harness's own requests to them (readiness, routes) go over TLS.
var tlsAddrs sync.Map

// noteTLSArgs records addr as a TLS port when a name server's arguments turn TLS on.
func noteTLSArgs(addr string, args []string) {
	for _, a := range args {
		if a == "--tls.server.mode=enforcing" || a == "--tls.server.mode=permissive" {
			tlsAddrs.Store(addr, true)
		}
	}
}

// noteTLS records the broker's address as a TLS port when its configuration turns TLS on.
func (b *broker) noteTLS() {
	if m := b.props["tls.server.mode"] + b.flags["tls.server.mode"]; m == "enforcing" || m == "permissive" {
		tlsAddrs.Store(b.addr, true)
	}
}

// dialRemoting connects to a remoting port, through TLS when it was started with TLS.
func dialRemoting(addr string, timeout time.Duration) (net.Conn, error) {
	if _, ok := tlsAddrs.Load(addr); !ok {
		return net.DialTimeout("tcp", addr, timeout)
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // test certificate
	return d.Dial("tcp", addr)
}

// plainRequest is rawRequest over plaintext whatever the port's TLS mode.
func plainRequest(addr string, code int, ext map[string]string) (*remotingCmd, error) {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return roundTrip(c, code, ext, nil)
}

// tlsArgs writes a fresh test certificate and key (ECDSA, for 127.0.0.1) for a TLS port.
func tlsArgs(t *testing.T) (cert, key string) {
	t.Helper()
	cert, key, err := testcert.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// tlsBrokerOpts turn TLS on a broker's remoting port in mode, and on its own connections.
func tlsBrokerOpts(mode, cert, key string) []brokerOpt {
	return []brokerOpt{withProp("tls.server.mode", mode), withProp("tls.server.certPath", cert),
		withProp("tls.server.keyPath", key), withProp("tls.enable", "true")}
}

// refusedPlaintext asserts a plaintext request to addr gets no answer: the port closes it.
func refusedPlaintext(t *testing.T, addr string) {
	t.Helper()
	resp, err := plainRequest(addr, codeGetRouteInfo, map[string]string{"topic": "TBW102"})
	if err == nil {
		t.Fatalf("plaintext request to enforcing port %s answered code %d", addr, resp.Code)
	}
	if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("plaintext request to %s: %v, want the connection closed", addr, err)
	}
}

// The official Go 4.x client keeps WithTls in a configuration every client of the process
// shares by default (rocketmq-client-go's remote.DefaultRemotingClientConfig): one producer
// made WithTls(true) turns TLS on for every later client in the process, and the other tests'
// plaintext clients then fail. So the TLS tests run their Go clients in a child process: this
// test binary again, with tlsClientEnv set, which TestMain hands to tlsClientMain.
const tlsClientEnv = "RR_TLS_CLIENT"

// tlsClientMain is the child's work, described by its environment: RR_TLS_CLIENT is "send" or
// "consume", RR_TLS_NS the name servers (';'-separated), RR_TLS_TOPIC, RR_TLS_N the message
// count, RR_TLS_ON whether to use TLS. "send" sends RR_TLS_N messages (bodies tls-<i>) with
// SendSync; "consume" starts a push consumer of a fresh group from the first offset and waits
// up to 30 s for the RR_TLS_N distinct bodies a "send" with the same RR_TLS_ON sent. It prints what it did and returns the exit status.
func tlsClientMain() int {
	ns := strings.Split(os.Getenv("RR_TLS_NS"), ";")
	topic := os.Getenv("RR_TLS_TOPIC")
	n, _ := strconv.Atoi(os.Getenv("RR_TLS_N"))
	on := os.Getenv("RR_TLS_ON") == "true"
	label := fmt.Sprintf("tls%v", on)
	switch os.Getenv(tlsClientEnv) {
	case "send":
		p, err := rocketmq.NewProducer(producer.WithNameServer(ns), producer.WithGroupName(uniq("PG")),
			producer.WithInstanceName(uniq("prod")), producer.WithRetry(2), producer.WithTls(on))
		if err == nil {
			err = p.Start()
		}
		if err != nil {
			fmt.Println("producer:", err)
			return 1
		}
		defer p.Shutdown()
		for i := range n {
			r, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("%s-%d", label, i))))
			if err != nil || r.Status != primitive.SendOK {
				fmt.Println("send", i, ":", err, r)
				return 1
			}
		}
		fmt.Printf("sent %d\n", n)
		return 0
	case "consume":
		var mu sync.Mutex
		got := map[string]bool{}
		pc, err := rocketmq.NewPushConsumer(consumer.WithNameServer(ns), consumer.WithGroupName(uniq("CG")),
			consumer.WithInstance(uniq("cons")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithTls(on))
		if err == nil {
			err = pc.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				mu.Lock()
				defer mu.Unlock()
				for _, m := range msgs {
					if strings.HasPrefix(string(m.Body), label+"-") { // the bodies a "send" of the same RR_TLS_ON sent
						got[string(m.Body)] = true
					}
				}
				return consumer.ConsumeSuccess, nil
			})
		}
		if err == nil {
			err = pc.Start()
		}
		if err != nil {
			fmt.Println("consumer:", err)
			return 1
		}
		defer pc.Shutdown()
		err = poll(30*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(got) < n {
				return fmt.Errorf("consumed %d of %d", len(got), n)
			}
			return nil
		})
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Printf("consumed %d\n", n)
		return 0
	}
	fmt.Println("unknown", tlsClientEnv, "mode")
	return 2
}

// runTLSClient runs tlsClientMain in a child process and fails the test unless it succeeds.
func runTLSClient(t *testing.T, mode string, nameServers []string, topic string, n int, tlsOn bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), tlsClientEnv+"="+mode, "RR_TLS_NS="+strings.Join(nameServers, ";"),
		"RR_TLS_TOPIC="+topic, "RR_TLS_N="+strconv.Itoa(n), "RR_TLS_ON="+strconv.FormatBool(tlsOn), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("Go client (%s, WithTls=%v) failed: %v\n%s", mode, tlsOn, err, out)
	}
	return strings.TrimSpace(string(out))
}

// sendAndConsumeTLS sends n messages with the official Go client (WithTls: TLS to the name
// server and the brokers) and consumes them all with a push consumer made the same way.
func sendAndConsumeTLS(t *testing.T, c *cluster, topic string, n int, tlsOn bool) {
	t.Helper()
	sent := runTLSClient(t, "send", c.clientNameServers(), topic, n, tlsOn)
	waitTopicRoute(t, c, topic)
	consumed := runTLSClient(t, "consume", c.clientNameServers(), topic, n, tlsOn)
	t.Logf("Go client (WithTls=%v) on %s: %s, %s", tlsOn, topic, sent, consumed)
}

// Enforcing name server and broker: the official Go client sends and consumes over TLS, and
// plaintext connections to either are closed unanswered.
func TestTLSEnforcingGoClient(t *testing.T) {
	t.Parallel()
	cert, key := tlsArgs(t)
	ns := startNamesrv(t, "--tls.server.mode=enforcing", "--tls.server.certPath="+cert, "--tls.server.keyPath="+key)
	b := startBroker(t, ns, tlsBrokerOpts("enforcing", cert, key)...) // registers over TLS
	c := &cluster{ns: ns, b: b}
	topic := uniq("TLS")
	sendAndConsumeTLS(t, c, topic, 20, true)
	refusedPlaintext(t, ns.addr)
	refusedPlaintext(t, b.addr)
	// mqadmin --tls reaches both (the name server for the route, the broker for its offsets).
	out := runAdmin(t, c, "topicStatus", "-t", topic, "--tls")
	if !strings.Contains(out, b.name) {
		t.Fatalf("mqadmin --tls topicStatus does not name the broker:\n%s", out)
	}
	t.Logf("mqadmin --tls topicStatus:\n%s", out)
}

// Permissive ports serve TLS and plaintext clients side by side.
func TestTLSPermissiveServesBoth(t *testing.T) {
	t.Parallel()
	cert, key := tlsArgs(t)
	ns := startNamesrv(t, "--tls.server.mode=permissive", "--tls.server.certPath="+cert, "--tls.server.keyPath="+key)
	b := startBroker(t, ns, tlsBrokerOpts("permissive", cert, key)...)
	c := &cluster{ns: ns, b: b}
	topic := uniq("TLSP")
	sendAndConsumeTLS(t, c, topic, 10, true)
	sendAndConsumeTLS(t, c, topic, 10, false) // same topic, plaintext client
	for _, addr := range []string{ns.addr, b.addr} {
		if resp, err := plainRequest(addr, codeGetRouteInfo, map[string]string{"topic": topic}); err != nil {
			t.Fatalf("plaintext request to permissive %s: %v", addr, err)
		} else if addr == ns.addr && resp.Code != respSuccess {
			t.Fatalf("plaintext route query: code %d %q", resp.Code, resp.Remark)
		}
	}
}

// A TLS port without a certificate is a start-up error, not a plaintext port.
func TestTLSWithoutCertificateRefusesToStart(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	for _, bin := range []string{"mqnamesrv", "mqbroker"} {
		dir := t.TempDir()
		p := &proc{name: bin, bin: binDir + "/" + bin, args: []string{"--tls.server.mode=enforcing", "--listenPort=" + fmt.Sprint(freePort(t))},
			env: []string{"HOME=" + dir}, logPath: dir + "/out.log"}
		if bin == "mqbroker" {
			p.args = append(p.args, "--storePathRootDir="+dir+"/store", "--namesrvAddr=127.0.0.1:1")
		}
		p.start(t)
		register(t, p)
		if err := poll(15*time.Second, func() error {
			if p.running() {
				return errors.New("still running")
			}
			return nil
		}); err != nil {
			t.Fatalf("%s with tls.server.mode=enforcing and no certificate kept running", bin)
		}
		if out := tail(p.logPath, 4000); !strings.Contains(out, "tls.server.certPath") {
			t.Fatalf("%s exited without naming the missing certificate:\n%s", bin, out)
		}
	}
}

// A DLedger group in enforcing mode: members register with the enforcing name server over TLS,
// a follower forwards a send to its leader over TLS, and the Go client sends and consumes over TLS.
func TestTLSEnforcingDLedgerGroup(t *testing.T) {
	t.Parallel()
	cert, key := tlsArgs(t)
	ns := startNamesrv(t, "--tls.server.mode=enforcing", "--tls.server.certPath="+cert, "--tls.server.keyPath="+key)
	g := startRaftGroup(t, ns, 3, tlsBrokerOpts("enforcing", cert, key)...)
	leader := g.waitMaster(t, 30*time.Second, nil)
	topic := uniq("TLSG")
	sendAndConsumeTLS(t, g.asCluster(leader), topic, 10, true)
	var follower *broker
	for _, b := range g.nodes {
		if b != leader {
			follower = b
			break
		}
	}
	resp, err := sendRaw(follower.addr, topic, 0, []byte("via-follower"), "")
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("send to a follower (forwarded to the leader over TLS): %v %+v", err, resp)
	}
	refusedPlaintext(t, follower.addr)
}

// The proxy's 4.x listener in enforcing mode, in front of an enforcing name server and broker:
// the official Go client sends and consumes through it over TLS (the proxy's own connections use
// TLS too), and plaintext connections to it are closed.
func TestTLSEnforcingThroughProxy(t *testing.T) {
	t.Parallel()
	cert, key := tlsArgs(t)
	ns := startNamesrv(t, "--tls.server.mode=enforcing", "--tls.server.certPath="+cert, "--tls.server.keyPath="+key)
	b := startBroker(t, ns, tlsBrokerOpts("enforcing", cert, key)...)
	px := startProxy4(t, ns, "--tls.server.mode=enforcing", "--tlsCertPath="+cert, "--tlsKeyPath="+key, "--tls.enable=true")
	c := &cluster{ns: ns, b: b, via: []string{px.remoting}}
	sendAndConsumeTLS(t, c, uniq("TLSX"), 10, true)
	refusedPlaintext(t, px.remoting)
}
