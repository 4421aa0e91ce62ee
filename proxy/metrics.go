package proxy

// Prometheus metrics of the proxy (metricsExporterType=PROM), under RocketMQ 5's names where
// its proxy has them (package metrics has the names the broker shares): rocketmq_rpc_latency
// (ms, by protocol_type="grpc", action = the RPC, result = the in-band status code), messages
// and bytes in (sends) and out (receives), the size of messages in, and (ours) the open gRPC
// connections. They are recorded by the interceptors (interceptors.go) and the stats handler
// (stats.go), never by the RPCs themselves.

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rocketraft/internal/opshttp"
	"rocketraft/metrics"
	"rocketraft/proxy/rmqpb"
)

// Label names of the proxy's rpc latency (RocketMQ 5 proxy's).
const (
	labelAction = "action"
	labelResult = "result"
	// protocolTypeGRPC is protocol_type of every call this proxy serves.
	protocolTypeGRPC = "grpc"
	// nodeTypeProxy is node_type of the proxy's metrics.
	nodeTypeProxy = "proxy"
	// grpcConnections (ours) counts the clients' open connections to the gRPC port.
	grpcConnections = "rocketmq_proxy_grpc_connections"
)

// proxyMetrics holds the proxy's collectors.
type proxyMetrics struct {
	registry *metrics.Registry
	latency  *prometheus.HistogramVec
	in       *prometheus.CounterVec
	inBytes  *prometheus.CounterVec
	size     *prometheus.HistogramVec
	out      *prometheus.CounterVec
	outBytes *prometheus.CounterVec
	conns    prometheus.Gauge
}

func newProxyMetrics(cluster, nodeID string) *proxyMetrics {
	m := &proxyMetrics{
		registry: metrics.NewRegistry(metrics.Identity{Cluster: cluster, NodeType: nodeTypeProxy, NodeID: nodeID}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: metrics.RPCLatency,
			Help:    "Time to answer a gRPC call (a stream: its whole life), in milliseconds.",
			Buckets: metrics.RPCLatencyBuckets}, []string{metrics.LabelProtocolType, labelAction, labelResult}),
		in: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metrics.MessagesInTotal,
			Help: "Messages stored through the proxy."}, []string{metrics.LabelTopic, metrics.LabelMessageType}),
		inBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metrics.ThroughputInTotal,
			Help: "Body bytes of the messages stored through the proxy."}, []string{metrics.LabelTopic, metrics.LabelMessageType}),
		size: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: metrics.MessageSize,
			Help: "Body size of the messages stored through the proxy, in bytes.", Buckets: metrics.MessageSizeBuckets},
			[]string{metrics.LabelTopic, metrics.LabelMessageType}),
		out: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metrics.MessagesOutTotal,
			Help: "Messages delivered to consumers through the proxy."}, []string{metrics.LabelTopic, metrics.LabelConsumerGroup}),
		outBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metrics.ThroughputOutTotal,
			Help: "Body bytes of the messages delivered through the proxy."}, []string{metrics.LabelTopic, metrics.LabelConsumerGroup}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{Name: grpcConnections, Help: "Open client connections to the gRPC port."}),
	}
	if err := m.registry.Register(m.latency, m.in, m.inBytes, m.size, m.out, m.outBytes, m.conns); err != nil {
		panic("proxy metrics: " + err.Error()) // duplicate descriptors: a programming error
	}
	return m
}

// observe records one finished call.
func (m *proxyMetrics) observe(rpc, result string, d time.Duration) {
	m.latency.WithLabelValues(protocolTypeGRPC, rpc, result).Observe(float64(d) / float64(time.Millisecond))
}

// sent counts the messages of a SendMessage its answer says were stored.
func (m *proxyMetrics) sent(req *rmqpb.SendMessageRequest, resp *rmqpb.SendMessageResponse) {
	entries := resp.GetEntries()
	for i, msg := range req.GetMessages() {
		if i >= len(entries) || entries[i].GetStatus().GetCode() != rmqpb.Code_OK {
			continue
		}
		topic, typ := msg.GetTopic().GetName(), messageTypeLabel(msg.GetSystemProperties().GetMessageType())
		n := float64(len(msg.GetBody()))
		m.in.WithLabelValues(topic, typ).Inc()
		m.inBytes.WithLabelValues(topic, typ).Add(n)
		m.size.WithLabelValues(topic, typ).Observe(n)
	}
}

// delivered counts one message handed to a consumer of group.
func (m *proxyMetrics) delivered(group string, msg *rmqpb.Message) {
	topic := msg.GetTopic().GetName()
	m.out.WithLabelValues(topic, group).Inc()
	m.outBytes.WithLabelValues(topic, group).Add(float64(len(msg.GetBody())))
}

func messageTypeLabel(t rmqpb.MessageType) string {
	switch t {
	case rmqpb.MessageType_FIFO:
		return metrics.MessageTypeFIFO
	case rmqpb.MessageType_DELAY:
		return metrics.MessageTypeDelay
	case rmqpb.MessageType_TRANSACTION:
		return metrics.MessageTypeTransaction
	}
	return metrics.MessageTypeNormal
}

// serveMetrics serves /metrics and the status page on host:port until stop closes (with token set, only to requests
// that carry it); it returns the bound address.
func (m *proxyMetrics) serveMetrics(host string, port int, token string, page *proxyStatus, stop <-chan struct{}, log interface{ Error(string, ...any) }) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.registry.Handler())
	page.register(mux) // statuspage.go: GET / and /status
	// GET/HEAD only and the optional token, like the broker's and the name server's HTTP ports (internal/opshttp).
	srv := &http.Server{Handler: opshttp.Guard(mux, opshttp.Options{AuthToken: token}, statusPagePublicPaths...), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "error", err)
		}
	}()
	go func() { <-stop; _ = srv.Close() }()
	return ln.Addr().String(), nil
}
