package integration

import (
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
// keep the client's own TLS dialing (TestProxyV5ClientMatrix). Addresses in dialTimeouts get that
// dial timeout instead of the client's 5 s (TestProxyTwoProxiesKill), through the same hook.
var tlsTargets, dialTimeouts sync.Map

func init() {
	dial := rmq.NewRpcClient
	rmq.NewRpcClient = func(target string, opts ...rmq.RpcClientOption) (rmq.RpcClient, error) {
		useTLS := false
		tlsTargets.Range(func(k, _ any) bool {
			// The target is the address, possibly behind a resolver scheme ("dns:///host:port").
			useTLS = target == k.(string) || strings.HasSuffix(target, "/"+k.(string))
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

// startProxy starts mqproxy for ns on a free loopback port and waits until it accepts
// (startProxyWith, without extra flags).
func startProxy(t testing.TB, ns *namesrv) *mqproxy {
	t.Helper()
	return startProxyWith(t, ns)
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
