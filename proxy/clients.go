package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"rocketraft/proxy/rmqpb"
)

// clientIDHeader is the metadata key under which the 5.x clients send their client id.
const clientIDHeader = "x-mq-client-id"

// clientRegistry keeps each client's open Telemetry stream and its latest Settings, so that the
// proxy can push commands to a client (a transaction check-back to a producer of the topic),
// and lists the topics producers publish (the producer groups the proxy registers with the
// brokers, see txnregister.go). A client is forgotten when its stream ends.
type clientRegistry struct {
	mu      sync.Mutex
	clients map[string]*telemetryClient              // by client id
	byTopic map[string]map[*telemetryClient]struct{} // publishing topics
	// changed is signalled (never blocking) when the set of published topics may have changed.
	changed chan struct{}
	anon    atomic.Uint64 // names streams that came without a client id
}

// telemetryClient is one client's Telemetry stream.
type telemetryClient struct {
	id     string
	stream rmqpb.MessagingService_TelemetryServer
	sendMu sync.Mutex // gRPC streams allow one sender at a time
	// Guarded by clientRegistry.mu.
	settings *rmqpb.Settings
	topics   []string
	// txn marks a client that has sent a transactional message: preferred for check-backs,
	// since only a producer with a transaction checker can answer them.
	txn atomic.Bool
	// gone is set when the stream ended: nothing is written on it any more.
	gone atomic.Bool
	// Commands pushed to the client (push): written in order by one goroutine at a time, at
	// most maxPushQueue waiting, so a client that stops reading holds one goroutine, not one
	// per command.
	qmu      sync.Mutex
	queue    []*rmqpb.TelemetryCommand
	draining bool
}

// maxPushQueue bounds the commands waiting for one client.
const maxPushQueue = 1024

// errClientBusy: the client's queue of pushed commands is full.
var errClientBusy = errors.New("the client is not reading its Telemetry stream (push queue full)")

func newClientRegistry() *clientRegistry {
	return &clientRegistry{clients: map[string]*telemetryClient{}, byTopic: map[string]map[*telemetryClient]struct{}{},
		changed: make(chan struct{}, 1)}
}

// clientID is the client id the request's metadata carries ("" when none).
func clientID(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(clientIDHeader); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// open registers a new Telemetry stream; a newer stream of the same client replaces the older
// one (the older one's close then changes nothing).
func (r *clientRegistry) open(stream rmqpb.MessagingService_TelemetryServer) *telemetryClient {
	id := clientID(stream.Context())
	if id == "" {
		id = fmt.Sprintf("anonymous-%d", r.anon.Add(1))
	}
	c := &telemetryClient{id: id, stream: stream}
	r.mu.Lock()
	old := r.clients[id]
	r.clients[id] = c
	if old != nil {
		c.settings, c.topics = old.settings, old.topics
		c.txn.Store(old.txn.Load())
		r.unindexLocked(old)
		r.indexLocked(c)
	}
	r.mu.Unlock()
	return c
}

// update records the latest Settings c sent and re-indexes its publishing topics.
func (r *clientRegistry) update(c *telemetryClient, s *rmqpb.Settings) {
	var topics []string
	for _, t := range s.GetPublishing().GetTopics() {
		if n := t.GetName(); n != "" && !slices.Contains(topics, n) {
			topics = append(topics, n)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c.settings = proto.Clone(s).(*rmqpb.Settings)
	if r.clients[c.id] != c {
		return // replaced by a newer stream of the same client
	}
	before := slices.Clone(c.topics)
	r.unindexLocked(c)
	c.topics = topics
	r.indexLocked(c)
	slices.Sort(before)
	slices.Sort(topics)
	if !slices.Equal(before, topics) {
		r.signal()
	}
}

// close forgets c (its stream ended), unless a newer stream of the same client replaced it.
func (r *clientRegistry) close(c *telemetryClient) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.clients[c.id] != c {
		c.gone.Store(true)
		return
	}
	c.gone.Store(true)
	delete(r.clients, c.id)
	r.unindexLocked(c)
	if len(c.topics) > 0 {
		r.signal()
	}
}

func (r *clientRegistry) indexLocked(c *telemetryClient) {
	for _, t := range c.topics {
		set := r.byTopic[t]
		if set == nil {
			set = map[*telemetryClient]struct{}{}
			r.byTopic[t] = set
		}
		set[c] = struct{}{}
	}
}

func (r *clientRegistry) unindexLocked(c *telemetryClient) {
	for _, t := range c.topics {
		if set := r.byTopic[t]; set != nil {
			delete(set, c)
			if len(set) == 0 {
				delete(r.byTopic, t)
			}
		}
	}
}

func (r *clientRegistry) signal() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// known reports whether client id has an open stream that sent its settings.
func (r *clientRegistry) known(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.clients[id]
	return c != nil && c.settings != nil
}

// markTransactional notes that client id sent a transactional message.
func (r *clientRegistry) markTransactional(id string) {
	r.mu.Lock()
	c := r.clients[id]
	r.mu.Unlock()
	if c != nil {
		c.txn.Store(true)
	}
}

// publisher picks a connected client publishing topic for a check-back, at random among those
// that sent transactional messages if any did, else among all; nil when there is none.
func (r *clientRegistry) publisher(topic string) *telemetryClient {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all, txn []*telemetryClient
	for c := range r.byTopic[topic] {
		all = append(all, c)
		if c.txn.Load() {
			txn = append(txn, c)
		}
	}
	if len(txn) > 0 {
		all = txn
	}
	if len(all) == 0 {
		return nil
	}
	return all[rand.IntN(len(all))]
}

// producerTopics lists the topics connected clients publish, sorted.
func (r *clientRegistry) producerTopics() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.byTopic))
	for t := range r.byTopic {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// send writes cmd on the client's stream (safe against the Telemetry loop's own answers).
func (c *telemetryClient) send(cmd *rmqpb.TelemetryCommand) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if c.gone.Load() {
		return fmt.Errorf("telemetry stream of client %s: %w", c.id, io.ErrClosedPipe)
	}
	if err := c.stream.Send(cmd); err != nil {
		return fmt.Errorf("telemetry stream of client %s: %w", c.id, err)
	}
	return nil
}

// push queues cmd for the client without waiting for the write; errClientBusy when its queue
// is full.
func (c *telemetryClient) push(cmd *rmqpb.TelemetryCommand, log hclog.Logger) error {
	c.qmu.Lock()
	if len(c.queue) >= maxPushQueue {
		c.qmu.Unlock()
		return fmt.Errorf("client %s: %w", c.id, errClientBusy)
	}
	c.queue = append(c.queue, cmd)
	start := !c.draining
	c.draining = true
	c.qmu.Unlock()
	if start {
		go c.drain(log)
	}
	return nil
}

// drain writes the queued commands until the queue is empty or the stream fails (the rest is
// dropped: the brokers ask again).
func (c *telemetryClient) drain(log hclog.Logger) {
	for {
		c.qmu.Lock()
		if len(c.queue) == 0 {
			c.draining = false
			c.qmu.Unlock()
			return
		}
		cmd := c.queue[0]
		c.queue = c.queue[1:]
		c.qmu.Unlock()
		if err := c.send(cmd); err != nil {
			c.qmu.Lock()
			dropped := len(c.queue) + 1
			c.queue, c.draining = nil, false
			c.qmu.Unlock()
			log.Debug("commands for a client dropped", "client", c.id, "dropped", dropped, "error", err)
			return
		}
	}
}
