package integration

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The official RocketMQ 5 Go client (v5.1.2) always dials TLS; the proxy serves plaintext gRPC
// for now, so every client in these tests dials through this wrapper of the client's exported
// connection hook.
func init() {
	dial := rmq.NewRpcClient
	rmq.NewRpcClient = func(target string, opts ...rmq.RpcClientOption) (rmq.RpcClient, error) {
		opts = append(opts, rmq.WithRpcClientConnOption(rmq.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))))
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
		args:    []string{"-n", ns.addr, "--grpcServerPort", strconv.Itoa(port), "--listenHost", "127.0.0.1"},
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

// TestProxyV5ProducerAcrossLeaderKill: the official 5.x Go producer sends through mqproxy to a
// three-node group (tag, keys, properties), the group's leader is killed with kill -9 while it
// keeps sending, and every acknowledged message is in its queue at its offset on every node.
func TestProxyV5ProducerAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("ProxyV5")
	sendFirst(t, newProducer(t, &cluster{ns: ns}), topic, "create-topic") // auto-create the topic
	px := startProxy(t, ns)
	p := newV5Producer(t, px.addr, topic)

	var acked []sent
	var longest time.Duration
	var killed, firstAfterKill time.Time
	lastOK := time.Now()
	send := func(i int) {
		msg := &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("v5-%05d-%s", i, chaosPad))}
		msg.SetTag("TagA")
		msg.SetKeys(fmt.Sprintf("key-%d", i))
		msg.AddProperty("seq", strconv.Itoa(i))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for {
			r, err := p.Send(ctx, msg)
			if err == nil && len(r) == 1 {
				acked = append(acked, sent{body: string(msg.Body), offset: r[0].Offset, msgID: r[0].MessageID, queue: -1})
				longest = max(longest, time.Since(lastOK))
				lastOK = time.Now()
				if !killed.IsZero() && firstAfterKill.IsZero() {
					firstAfterKill = lastOK
				}
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("send %d through the proxy: %v", i, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for i := 0; i < 100; i++ {
		send(i)
	}
	leader.kill()
	killed = time.Now()
	for i := 100; i < 300; i++ {
		send(i)
	}
	t.Logf("proxy: 300 sends acknowledged through the proxy, the leader killed after 100; longest gap between acknowledgements %v; first acknowledgement %v after the kill",
		longest.Round(time.Millisecond), firstAfterKill.Sub(killed).Round(time.Millisecond))
	leader.restart()
	g.waitMaster(t, 20*time.Second, nil)
	queues, err := queueCount(ns.addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, s := range acked {
		want[s.body] = true
	}
	eventually(t, 30*time.Second, "every acknowledged message on every node", func() error {
		for _, b := range g.nodes {
			got := map[string]bool{}
			for _, recs := range readQueues(t, b.addr, topic, queues) {
				for _, r := range recs {
					got[string(r.Body)] = true
				}
			}
			for body := range want {
				if !got[body] {
					return fmt.Errorf("%s lacks %s", b.proc.name, short(body))
				}
			}
		}
		return nil
	})
}
