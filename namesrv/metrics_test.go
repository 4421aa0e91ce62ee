package namesrv

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"rocketraft/remoting"
)

// The name server's /metrics: request counts and latency by code (from the remoting hook) and
// the route table's sizes, labelled node_type="nameserver" and node_id = its remoting address.
func TestMetricsEndpoint(t *testing.T) {
	s := startServer(t, Config{HTTPAddr: "127.0.0.1:0"})
	if s.HTTPAddr() == "" {
		t.Fatal("no http address with HTTPAddr set")
	}
	c := newTestClient(t, s.Addr())
	expectCode(t, registerFakeBroker(c, "b1", "127.0.0.1:10911", 0, registerBody(topic("T1", 4, 6), topic("T2", 4, 6))), remoting.Success)
	for range 3 {
		c.call(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T1"}, nil)
	}
	c.call(remoting.GetRouteInfoByTopic, map[string]string{"topic": "nope"}, nil)

	id := fmt.Sprintf(`node_id=%q,node_type="nameserver"`, s.Addr())
	text := scrape(t, "http://"+s.HTTPAddr()+"/metrics")
	for _, want := range []string{
		fmt.Sprintf(`rocketmq_rpc_latency_count{%s,protocol_type="remoting",request_code="%d",response_code="0"} 3`, id, remoting.GetRouteInfoByTopic),
		fmt.Sprintf(`rocketmq_rpc_latency_count{%s,protocol_type="remoting",request_code="%d",response_code="%d"} 1`, id, remoting.GetRouteInfoByTopic, remoting.TopicNotExist),
		fmt.Sprintf(`rocketmq_rpc_latency_count{%s,protocol_type="remoting",request_code="%d",response_code="0"} 1`, id, remoting.RegisterBroker),
		fmt.Sprintf(`rocketmq_namesrv_brokers{%s} 1`, id),
		fmt.Sprintf(`rocketmq_namesrv_broker_groups{%s} 1`, id),
		fmt.Sprintf(`rocketmq_namesrv_clusters{%s} 1`, id),
		fmt.Sprintf(`rocketmq_namesrv_topics{%s} 2`, id),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}
}

// Without HTTPAddr nothing listens.
func TestMetricsOff(t *testing.T) {
	s := startServer(t, Config{})
	if a := s.HTTPAddr(); a != "" {
		t.Fatalf("http address %q without HTTPAddr", a)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}
