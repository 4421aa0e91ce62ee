package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"rocketraft/broker"
	"rocketraft/config"
	"rocketraft/message"
	"rocketraft/namesrv"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// testBroker is an in-process name server and broker (the project's real
// ones) shared by the end-to-end tests of this package. It is started on
// first use and closed by TestMain.
type testBroker struct {
	ns     *namesrv.Server
	br     *broker.Broker
	dir    string
	nsAddr string
	cl     *remoting.Client
}

var (
	sharedOnce   sync.Once
	sharedBroker *testBroker
	sharedErr    error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedBroker != nil {
		sharedBroker.close()
	}
	os.Exit(code)
}

// realBroker returns the shared in-process broker, starting it if needed.
func realBroker(t testing.TB) *testBroker {
	t.Helper()
	sharedOnce.Do(func() { sharedBroker, sharedErr = startTestBroker() })
	if sharedErr != nil {
		t.Fatalf("start in-process broker: %v", sharedErr)
	}
	return sharedBroker
}

func startTestBroker() (_ *testBroker, err error) {
	tb := &testBroker{cl: remoting.NewClient(remoting.ClientConfig{})}
	defer func() {
		if err != nil {
			tb.close()
		}
	}()
	if tb.dir, err = os.MkdirTemp("", "mqbench-test-"); err != nil {
		return nil, err
	}
	if tb.ns, err = namesrv.New(namesrv.Config{ListenAddr: "127.0.0.1:0"}); err != nil {
		return nil, err
	}
	if err = tb.ns.Start(); err != nil {
		tb.ns = nil
		return nil, err
	}
	tb.nsAddr = tb.ns.Addr()
	cfg := config.NewBroker()
	cfg.BrokerName = "bench-test-broker"
	cfg.StorePathRootDir = tb.dir
	cfg.ListenPort = 0
	cfg.NamesrvAddr = tb.nsAddr
	cfg.MappedFileSizeCommitLog = 8 << 20
	cfg.MapedFileSizeConsumeQueue = 20000 * 20
	cfg.Normalize()
	if err = cfg.Validate(); err != nil {
		return nil, err
	}
	if tb.br, err = broker.New(cfg, nil); err != nil {
		return nil, err
	}
	if err = tb.br.Start(); err != nil {
		_ = tb.br.Close()
		tb.br = nil
		return nil, err
	}
	// Wait until the broker has registered (TBW102 is routable).
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = fetchRoute(context.Background(), tb.cl, []string{tb.nsAddr}, defaultTopic)
		if err == nil {
			return tb, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("broker did not register: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (tb *testBroker) close() {
	if tb.br != nil {
		_ = tb.br.Close()
	}
	if tb.ns != nil {
		_ = tb.ns.Close()
	}
	_ = tb.cl.Close()
	if tb.dir != "" {
		_ = os.RemoveAll(tb.dir)
	}
}

// route returns the topic's route, waiting up to 5 s for it to appear
// (auto-created topics are registered asynchronously).
func (tb *testBroker) route(t testing.TB, topic string) *protocol.TopicRouteData {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rd, err := fetchRoute(context.Background(), tb.cl, []string{tb.nsAddr}, topic)
		if err == nil {
			return rd
		}
		if time.Now().After(deadline) {
			t.Fatalf("route of %s: %v", topic, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stored returns the number of messages stored in topic: the sum of its
// queues' max offsets.
func (tb *testBroker) stored(t testing.TB, topic string) int64 {
	t.Helper()
	var n int64
	for _, q := range subscribeQueues(tb.route(t, topic)) {
		off, err := queryMaxOffset(context.Background(), tb.cl, q, topic)
		if err != nil {
			t.Fatal(err)
		}
		n += off
	}
	return n
}

// waitStored waits up to 15 s (race detector, busy CI) for topic to hold want messages and returns
// the count it saw last.
func (tb *testBroker) waitStored(t testing.TB, topic string, want int64) int64 {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		n := tb.stored(t, topic)
		if n >= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// firstRecord pulls the first message of the first non-empty queue of topic.
func (tb *testBroker) firstRecord(t testing.TB, topic string) message.View {
	t.Helper()
	for _, q := range subscribeQueues(tb.route(t, topic)) {
		h := protocol.PullMessageRequestHeader{ConsumerGroup: "mqbench_test_peek", Topic: topic, QueueID: q.id,
			MaxMsgNums: 1, SysFlag: protocol.PullSubscription, Subscription: "*", ExpressionType: "TAG"}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := tb.cl.Invoke(ctx, q.addr, remoting.NewRequest(remoting.PullMessage, h.ToExt(), nil))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if resp.Code != remoting.Success {
			continue
		}
		v, err := message.ParseView(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	t.Fatalf("topic %s holds no message", topic)
	return message.View{}
}
