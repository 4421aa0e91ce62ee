package proxy

// One info line per client connection to the gRPC port: when it opens (remote address), when
// the client first names itself in a call's metadata (x-mq-client-id, language, version), and
// when it closes (with the client id and how long it lasted). gRPC's stats handler sees every
// connection and call without the RPCs knowing; it also keeps the connection gauge.

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/stats"
)

// connLog is the proxy's stats.Handler.
type connLog struct {
	log     hclog.Logger
	metrics *proxyMetrics
}

type connKey struct{}

// connInfo is what the proxy knows of one connection.
type connInfo struct {
	remote string
	opened time.Time
	once   sync.Once
	mu     sync.Mutex
	client string
}

func (h *connLog) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	remote := ""
	if info.RemoteAddr != nil {
		remote = info.RemoteAddr.String()
	}
	return context.WithValue(ctx, connKey{}, &connInfo{remote: remote, opened: time.Now()})
}

func (h *connLog) HandleConn(ctx context.Context, s stats.ConnStats) {
	c, _ := ctx.Value(connKey{}).(*connInfo)
	if c == nil {
		return
	}
	switch s.(type) {
	case *stats.ConnBegin:
		h.metrics.conns.Inc()
		h.log.Info("client connected", "remote", c.remote)
	case *stats.ConnEnd:
		h.metrics.conns.Dec()
		c.mu.Lock()
		client := c.client
		c.mu.Unlock()
		h.log.Info("client disconnected", "remote", c.remote, "client", client, "after", time.Since(c.opened).Round(time.Millisecond))
	}
}

func (h *connLog) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// HandleRPC notes the client id of the connection's first call that carries one.
func (h *connLog) HandleRPC(ctx context.Context, s stats.RPCStats) {
	in, ok := s.(*stats.InHeader)
	if !ok {
		return
	}
	c, _ := ctx.Value(connKey{}).(*connInfo)
	id := first(in.Header, mdClientID)
	if c == nil || id == "" {
		return
	}
	c.once.Do(func() {
		c.mu.Lock()
		c.client = id
		c.mu.Unlock()
		h.log.Info("client identified", "remote", c.remote, "client", id,
			"language", first(in.Header, mdLanguage), "version", first(in.Header, mdClientVersion))
	})
}
