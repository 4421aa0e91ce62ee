package bench

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// resolvePublishQueues finds where to send: the topic's own route or, while
// the topic has none, TBW102's (capped at defaultTopicQueueNums queues per
// broker, the queues a broker creates the topic with). It retries until wait
// has passed. viaDefault tells that the topic is to be auto-created.
func resolvePublishQueues(ctx context.Context, cl *remoting.Client, ns []string, topic string, wait time.Duration, stderr io.Writer) (qs []nativeQueue, viaDefault bool, err error) {
	deadline := time.Now().Add(wait)
	for attempt := 0; ; attempt++ {
		var rd *protocol.TopicRouteData
		rd, err = fetchRoute(ctx, cl, ns, topic)
		if err == nil {
			if qs = publishQueues(rd, 0); len(qs) > 0 {
				return qs, false, nil
			}
			err = fmt.Errorf("the route of %s has no writable queue on a master", topic)
		} else if errors.Is(err, errNoRoute) {
			rd, err = fetchRoute(ctx, cl, ns, defaultTopic)
			if err == nil {
				if qs = publishQueues(rd, defaultTopicQueueNums); len(qs) > 0 {
					return qs, true, nil
				}
				err = fmt.Errorf("neither %s nor %s has a writable queue on a master", topic, defaultTopic)
			}
		}
		if time.Now().After(deadline) {
			return nil, false, err
		}
		if attempt == 0 {
			fmt.Fprintf(stderr, "topic %s has no usable route yet, retrying for up to %s: %v\n", topic, wait, err)
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// nativeSender builds the send requests of one sending goroutine.
type nativeSender struct {
	cfg       *ProduceConfig
	body      []byte
	ids       *uniqIDs
	seq       uint64 // next id number: goroutine number in the high bits
	props     []byte // reused buffer for a message's properties
	static    string // properties common to every message (TAGS, WAIT)
	batchHead string // header properties of a batch request
	single    []sendField
	batch     []sendField
	entries   []message.BatchEntry
}

// nextProps returns the properties of one message: the common ones plus a
// fresh UNIQ_KEY.
func (s *nativeSender) nextProps() string {
	s.props = append(s.props[:0], s.static...)
	s.props = append(s.props, message.PropertyUniqClientMessageID...)
	s.props = append(s.props, message.NameValueSeparator)
	s.props = s.ids.appendID(s.props, s.seq)
	s.props = append(s.props, message.PropertySeparator)
	s.seq++
	return string(s.props)
}

// sendField is one field of a send header template.
type sendField struct{ key, value string }

// sendTemplates returns the V2 send headers (the one-letter keys a..m) of
// single and batch sends with everything but the queue id (e), born
// timestamp (g) and properties (i), in key order.
func sendTemplates(cfg *ProduceConfig) (single, batch []sendField) {
	h := protocol.SendMessageRequestHeader{
		ProducerGroup: cfg.Group,
		Topic:         cfg.Topic,
		// c and d always, as the official clients send them: they only
		// matter when the broker does not know the topic yet.
		DefaultTopic:          defaultTopic,
		DefaultTopicQueueNums: defaultTopicQueueNums,
	}
	fields := func(ext map[string]string) []sendField {
		var out []sendField
		for _, k := range slices.Sorted(maps.Keys(ext)) {
			if k != "e" && k != "g" && k != "i" {
				out = append(out, sendField{k, ext[k]})
			}
		}
		return out
	}
	single = fields(h.ToExtV2())
	h.Batch = true
	batch = fields(h.ToExtV2())
	return single, batch
}

// request builds a SEND_MESSAGE_V2 request of one message, or a
// SEND_BATCH_MESSAGE request when the run batches, for queue q. The header
// is the template's fields and the per-request ones, appended flat
// (remoting.Command.AppendExt): no map per request.
func (s *nativeSender) request(q nativeQueue, n int) (*remoting.Command, error) {
	code, body := remoting.SendMessageV2, s.body
	fixed, props := s.single, ""
	if s.cfg.Batch == 1 {
		props = s.nextProps()
	} else {
		s.entries = s.entries[:0]
		for range n {
			s.entries = append(s.entries, message.BatchEntry{Body: s.body, Properties: s.nextProps()})
		}
		var err error
		if body, err = message.EncodeBatch(s.entries); err != nil {
			return nil, err
		}
		code, fixed, props = remoting.SendBatchMessage, s.batch, s.batchHead
	}
	req := remoting.NewFlatRequest(code, len(fixed)+3, body)
	for _, f := range fixed {
		req.AppendExt(f.key, f.value)
	}
	req.AppendExt("e", q.idStr)
	req.AppendExt("g", strconv.FormatInt(time.Now().UnixMilli(), 10))
	req.AppendExt("i", props)
	if s.cfg.Serialize == SerializeRocketMQ {
		req.SerializeType = remoting.SerializeRocketMQ
	}
	return req, nil
}

// asyncSlot is one of the async producer's in-flight requests: its client, message-id
// sequence and next queue, and launch, which sends its next request.
type asyncSlot struct {
	cl     *remoting.Client
	s      *nativeSender
	qi     int
	launch func()
	paced  bool // the slot of the next send is reserved (--rate): launch sends it now
}

// sendOutcome turns a send's answer into nil (SEND_OK) or the error the run counts.
func sendOutcome(resp *remoting.Command, err error, q nativeQueue) error {
	switch {
	case err != nil:
		return err
	case resp.Code == remoting.Success:
		return nil
	case resp.Code == remoting.FlushDiskTimeout || resp.Code == remoting.FlushSlaveTimeout || resp.Code == remoting.SlaveNotAvailable:
		// Stored, but not as durably as asked: the official client reports such a send as a
		// non-OK status.
		return fmt.Errorf("send status %s (code %d)", responseCodeName(resp.Code), resp.Code)
	default:
		return fmt.Errorf("send failed: %s (code %d) from %s: %s", responseCodeName(resp.Code), resp.Code, q.broker, resp.Remark)
	}
}

// runNativeProduce is RunProduce with the native client, spread over Connections remoting
// clients; see RunProduce for output and stop conditions. Sync and oneway mode run Concurrency
// goroutines, each looping on a blocking send. Async mode keeps Concurrency requests in flight
// with callbacks (remoting.Conn.InvokeAsync): each answer records its send and issues the slot's
// next one on the connection's read goroutine, so no goroutine waits per request: the tool spends
// about 15 % less CPU per message than with blocking sends (scheduling, channels, a timer per
// request), which on a machine it shares with the brokers is CPU they get back.
func runNativeProduce(ctx context.Context, cfg ProduceConfig, ns []string, stdout, stderr io.Writer) (*Summary, error) {
	defer lessGC()()
	cls := newRemotingClients(cfg.Connections)
	defer closeRemotingClients(cls)
	wait := nativeRouteWait
	if cfg.Duration > 0 {
		wait = min(wait, cfg.Duration)
	}
	qs, viaDefault, err := resolvePublishQueues(ctx, cls[0], ns, cfg.Topic, wait, stderr)
	if err != nil {
		return nil, fmt.Errorf("route: %w", err)
	}
	routes := newNativeRoutes(qs, func() ([]nativeQueue, error) {
		rctx, cancel := context.WithTimeout(ctx, nativeRPCTimeout)
		defer cancel()
		fresh, _, err := resolvePublishQueues(rctx, cls[0], ns, cfg.Topic, 0, io.Discard)
		return fresh, err
	}, stderr)

	body := make([]byte, cfg.Size)
	_, _ = crand.Read(body) // incompressible payload
	common := map[string]string{message.PropertyWaitStoreMsgOK: "true"}
	if cfg.Tag != "" {
		common[message.PropertyTags] = cfg.Tag
	}
	static := message.FormatProperties(common)
	batchHead := message.FormatProperties(map[string]string{message.PropertyWaitStoreMsgOK: "true"})
	ids := newUniqIDs()
	single, batch := sendTemplates(&cfg)

	lines, summaryOut := stdout, stdout
	if cfg.JSON {
		lines = stderr
	}
	if cfg.Quiet {
		lines = nil
	}
	rec := newSendRecorder(&cfg, stderr)
	elog := newErrorLog(stderr, cfg.MaxPrintedErrors)
	rep := newReporter(rec, lines, "lat", cfg.Interval, cfg.Warmup, false)
	route := cfg.Topic
	if viaDefault {
		route = defaultTopic + " (auto-create)"
	}
	fmt.Fprintf(stderr, "mqbench produce: client=native topic=%s mode=%s size=%d batch=%d concurrency=%d connections=%d queues=%d route=%s namesrv=%v\n",
		cfg.Topic, cfg.Mode, cfg.Size, cfg.Batch, cfg.Concurrency, len(cls), len(qs), route, ns)

	var (
		stopped atomic.Bool
		retried atomic.Uint64
		wg      sync.WaitGroup
		budget  = sendBudget{limit: cfg.Messages}
	)
	fail := func(err error) {
		rec.RecordError()
		elog.Add(err)
	}
	finished := make(chan struct{})
	repDone := make(chan struct{})
	go func() { rep.run(finished); close(repDone) }()

	oneway := cfg.Mode == ModeOneway
	newSender := func(g int) *nativeSender {
		return &nativeSender{cfg: &cfg, body: body, ids: ids, seq: uint64(g) << 40, static: static, batchHead: batchHead,
			single: single, batch: batch}
	}
	pace := newPacer(cfg.Rate)
	if cfg.Mode == ModeAsync {
		// Async: Concurrency requests in flight, each answer's callback recording it and
		// sending the next request of its slot (a closed loop, as an asynchronous client
		// runs), with no goroutine waiting per request. With --rate a slot's next send
		// starts at its reserved time, from a timer when that is still ahead: the run holds
		// the rate with at most Concurrency in flight.
		wg.Add(cfg.Concurrency)
		for g := 0; g < cfg.Concurrency; g++ {
			sl := &asyncSlot{cl: cls[g%len(cls)], s: newSender(g), qi: g % len(qs)}
			sl.launch = func() {
				if stopped.Load() {
					wg.Done()
					return
				}
				if pace != nil && !sl.paced {
					if d := pace.reserve(cfg.Batch); d > 0 {
						sl.paced = true
						time.AfterFunc(d, sl.launch)
						return
					}
				}
				sl.paced = false
				n := budget.take(cfg.Batch)
				if n == 0 {
					wg.Done()
					return
				}
				qs, gen := routes.get()
				if sl.qi >= len(qs) {
					sl.qi = 0
				}
				q := qs[sl.qi]
				if sl.qi++; sl.qi == len(qs) {
					sl.qi = 0
				}
				retry := func(err error) {
					if classifySend(err) == failDeadAddress {
						go routes.renew(gen) // the failed send is counted; later ones go to the fresh route
					}
					fail(err)
					time.AfterFunc(errorBackoff, sl.launch)
				}
				req, err := sl.s.request(q, n)
				if err != nil {
					retry(err)
					return
				}
				t0 := time.Now()
				done := func(resp *remoting.Command, err error) {
					lat := time.Since(t0)
					if err = sendOutcome(resp, err, q); err != nil {
						retry(err)
						return
					}
					rec.RecordOp(lat, n, n*cfg.Size)
					sl.launch()
				}
				deadline := t0.Add(cfg.SendTimeout)
				if conn := sl.cl.Open(q.addr); conn != nil {
					if err := conn.InvokeAsync(req, deadline, done); err != nil {
						retry(err)
					}
					return
				}
				go func() { // dial off the connection goroutine the callback may run on
					if err := sl.cl.InvokeAsync(context.Background(), q.addr, req, deadline, done); err != nil {
						retry(err)
					}
				}()
			}
			sl.launch()
		}
	}
	for g := 0; g < cfg.Concurrency && cfg.Mode != ModeAsync; g++ {
		cl := cls[g%len(cls)]
		s := newSender(g)
		rt := &retrier{max: cfg.RouteRetries, stopped: &stopped, retried: &retried, renew: routes.renew}
		wg.Add(1)
		go func() {
			defer wg.Done()
			qi := g
			for pace.wait(cfg.Batch, &stopped) {
				n := budget.take(cfg.Batch)
				if n == 0 {
					return
				}
				t0 := time.Now()
				err := rt.do(func() (uint64, error) {
					qs, gen := routes.get()
					q := qs[qi%len(qs)]
					qi++
					req, err := s.request(q, n)
					if err != nil {
						return gen, err
					}
					if oneway {
						return gen, cl.InvokeOneway(context.Background(), q.addr, req)
					}
					rctx, cancel := context.WithTimeout(context.Background(), cfg.SendTimeout)
					resp, err := cl.Invoke(rctx, q.addr, req)
					cancel()
					return gen, sendOutcome(resp, err, q)
				})
				if err == nil {
					rec.RecordOp(time.Since(t0), n, n*cfg.Size)
					continue
				}
				fail(err)
				time.Sleep(errorBackoff)
			}
		}()
	}

	workersDone := make(chan struct{})
	go func() { wg.Wait(); close(workersDone) }()
	waitForEnd(ctx, cfg.Duration, workersDone)
	stopped.Store(true)
	// In-flight requests end within SendTimeout.
	grace := cfg.SendTimeout + 2*time.Second
	graceTimer := time.NewTimer(grace)
	defer graceTimer.Stop()
	select {
	case <-workersDone:
	case <-graceTimer.C:
		fmt.Fprintf(stderr, "warning: senders did not stop within %s\n", grace)
	}
	close(finished)
	<-repDone
	if oneway {
		// Let the broker read what is still queued or in the socket.
		time.Sleep(onewayLinger)
	}

	sum := &Summary{
		Kind: "produce", Mode: cfg.Mode, Client: ClientNative, Topic: cfg.Topic,
		Size: cfg.Size, Batch: cfg.Batch, Concurrency: cfg.Concurrency,
		Latency: "send",
	}
	rep.win.summary(sum)
	sum.setRecovery(retried.Load(), rec.LongestGap(time.Now()))
	sum.TopErrors = elog.Top(5)
	printSummary(sum, cfg.JSON, summaryOut, stderr)
	return sum, nil
}
