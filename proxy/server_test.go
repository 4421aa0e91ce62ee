package proxy

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"rocketraft/proxy/rmqpb"
)

const (
	testAK = "proxyTestAK1"
	testSK = "proxyTestSecret1"
)

// startTestServer runs a proxy on a free loopback port with no reachable name server: enough
// for the calls that need no broker.
func startTestServer(t *testing.T, edit func(*Config)) (*Server, rmqpb.MessagingServiceClient) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NamesrvAddr, cfg.GrpcServerPort, cfg.ListenHost, cfg.RemotingListenPort = "127.0.0.1:1", 0, "127.0.0.1", 0
	cfg.MetricsExporterType, cfg.MetricsPromExporterPort = MetricsProm, 0
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(time.Second) })
	cc, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return s, rmqpb.NewMessagingServiceClient(cc)
}

// signed is ctx with a 5.x client's authorization header for ak/sk (the Go client's form).
func signed(ctx context.Context, ak, sk string) context.Context {
	date := time.Now().Format("20060102T150405Z")
	mac := hmac.New(sha1.New, []byte(sk))
	mac.Write([]byte(date))
	auth := "MQv2-HMAC-SHA1 Credential=" + ak + "//Rocketmq, SignedHeaders=x-mq-date-time, Signature=" + hex.EncodeToString(mac.Sum(nil))
	return metadata.AppendToOutgoingContext(ctx, "x-mq-date-time", date, "authorization", auth, "x-mq-client-id", "test@1")
}

// TestShutdownEndsTelemetry: a Telemetry stream kept open by its client ends with OK as soon as
// the proxy shuts down, and the shutdown does not wait for the client.
func TestShutdownEndsTelemetry(t *testing.T) {
	s, c := startTestServer(t, nil)
	st, err := c.Telemetry(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: &rmqpb.Settings{}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Recv(); err != nil || r.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("settings answer %v %v", r, err)
	}
	start := time.Now()
	if err := s.Close(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("shutdown took %v with a Telemetry stream open", d)
	}
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("the Telemetry stream ended with %v, want io.EOF (status OK)", err)
	}
}

// TestACLInBand: with ACL on, missing or wrong credentials are UNAUTHORIZED, a missing
// permission FORBIDDEN, all in-band; the right ones pass; the metrics count every call.
func TestACLInBand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain_acl.yml")
	yml := "accounts:\n  - accessKey: " + testAK + "\n    secretKey: " + testSK + "\n    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n    topicPerms: [OpenTopic=PUB|SUB]\n"
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	s, c := startTestServer(t, func(c *Config) { c.AclEnable, c.AclConfigFile = true, file })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hb := &rmqpb.HeartbeatRequest{Group: &rmqpb.Resource{Name: "G1"}}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want rmqpb.Code
	}{
		{"no credentials", ctx, rmqpb.Code_UNAUTHORIZED},
		{"wrong secret", signed(ctx, testAK, "wrongSecret99"), rmqpb.Code_UNAUTHORIZED},
		{"unknown key", signed(ctx, "nobodyAK1", testSK), rmqpb.Code_UNAUTHORIZED},
		// Past the ACL, the heartbeat of a client that sent no Settings yet asks for them.
		{"right", signed(ctx, testAK, testSK), rmqpb.Code_UNRECOGNIZED_CLIENT_TYPE},
	} {
		r, err := c.Heartbeat(tc.ctx, hb)
		if err != nil || r.GetStatus().GetCode() != tc.want {
			t.Fatalf("%s: %v %v, want %v", tc.name, r.GetStatus(), err, tc.want)
		}
	}
	// Node's form: Credential=<AK> without a slash.
	date := time.Now().Format("20060102T150405Z")
	mac := hmac.New(sha1.New, []byte(testSK))
	mac.Write([]byte(date))
	nctx := metadata.AppendToOutgoingContext(ctx, "x-mq-date-time", date, "authorization",
		"MQv2-HMAC-SHA1 Credential="+testAK+", SignedHeaders=x-mq-date-time, Signature="+hex.EncodeToString(mac.Sum(nil)))
	if r, err := c.Heartbeat(nctx, hb); err != nil || r.GetStatus().GetCode() != rmqpb.Code_UNRECOGNIZED_CLIENT_TYPE {
		t.Fatalf("Node-style credential: %v %v", r.GetStatus(), err)
	}
	send := &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{Topic: &rmqpb.Resource{Name: "ClosedTopic"}, Body: []byte("x"),
		SystemProperties: &rmqpb.SystemProperties{MessageId: "1"}}}}
	r, err := c.SendMessage(signed(ctx, testAK, testSK), send)
	if err != nil || r.GetStatus().GetCode() != rmqpb.Code_FORBIDDEN || !strings.Contains(r.GetStatus().GetMessage(), "ClosedTopic") {
		t.Fatalf("send to a DENY topic: %v %v, want FORBIDDEN naming it", r.GetStatus(), err)
	}
	// A server stream is refused in-band too.
	rs, err := c.ReceiveMessage(ctx, &rmqpb.ReceiveMessageRequest{Group: &rmqpb.Resource{Name: "G1"},
		MessageQueue: &rmqpb.MessageQueue{Topic: &rmqpb.Resource{Name: "OpenTopic"}}})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := rs.Recv(); err != nil || m.GetStatus().GetCode() != rmqpb.Code_UNAUTHORIZED {
		t.Fatalf("unsigned ReceiveMessage: %v %v", m, err)
	}
	if _, err := rs.Recv(); err != io.EOF {
		t.Fatalf("after the refusal: %v, want the stream to end OK", err)
	}
	// Telemetry with a forbidden topic in its settings.
	ts, err := c.Telemetry(signed(ctx, testAK, testSK))
	if err != nil {
		t.Fatal(err)
	}
	_ = ts.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: &rmqpb.Settings{
		PubSub: &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{Topics: []*rmqpb.Resource{{Name: "ClosedTopic"}}}}}}})
	if m, err := ts.Recv(); err != nil || m.GetStatus().GetCode() != rmqpb.Code_FORBIDDEN {
		t.Fatalf("Telemetry publishing a DENY topic: %v %v", m, err)
	}

	body := scrape(t, s)
	for _, want := range [][]string{
		{`rocketmq_rpc_latency_count{action="Heartbeat"`, `protocol_type="grpc"`, `result="UNAUTHORIZED"} 3`},
		{`rocketmq_rpc_latency_count{action="Heartbeat"`, `result="UNRECOGNIZED_CLIENT_TYPE"} 2`},
		{`rocketmq_rpc_latency_count{action="SendMessage"`, `result="FORBIDDEN"} 1`},
		{`rocketmq_proxy_grpc_connections{`, `node_type="proxy"} 1`},
	} {
		if !hasLine(body, want...) {
			t.Fatalf("/metrics has no line with %q:\n%s", want, body)
		}
	}
}

// hasLine reports whether one line of text contains every part.
func hasLine(text string, parts ...string) bool {
	for _, l := range strings.Split(text, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

func scrape(t *testing.T, s *Server) string {
	t.Helper()
	cl := &httpGetter{}
	return cl.get(t, "http://"+s.MetricsAddr()+"/metrics")
}

// TestMetricsToken: with metricsAuthToken set, /metrics answers 401 without the bearer token or
// with a wrong one, 200 with it; other methods than GET and HEAD are 405.
func TestMetricsToken(t *testing.T) {
	s, _ := startTestServer(t, func(c *Config) { c.MetricsAuthToken = "scrape-token-1" })
	get := func(method, token string) int {
		req, err := http.NewRequest(method, "http://"+s.MetricsAddr()+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		method, token string
		want          int
	}{
		{"GET", "", http.StatusUnauthorized},
		{"GET", "wrong", http.StatusUnauthorized},
		{"GET", "scrape-token-1", http.StatusOK},
		{"HEAD", "scrape-token-1", http.StatusOK},
		{"POST", "scrape-token-1", http.StatusMethodNotAllowed},
	} {
		if got := get(c.method, c.token); got != c.want {
			t.Errorf("%s /metrics with token %q: %d, want %d", c.method, c.token, got, c.want)
		}
	}
}
