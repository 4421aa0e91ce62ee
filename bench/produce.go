package bench

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// Send modes of the producer benchmark.
const (
	ModeSync   = "sync"
	ModeAsync  = "async"
	ModeOneway = "oneway"
)

// ProduceConfig configures a produce run.
type ProduceConfig struct {
	Common
	// Mode is ModeSync, ModeAsync or ModeOneway.
	Mode string
	// Size is the message body size in bytes.
	Size int
	// Concurrency is the number of sending goroutines (sync, oneway) or
	// the number of sends kept in flight (async).
	Concurrency int
	// Batch is the number of messages per send call; >1 uses the client's
	// batch send (one SEND_BATCH_MESSAGE request).
	Batch int
	// Messages stops the run after this many messages were issued
	// (0: no limit).
	Messages int64
	// Tag is set on every message if not empty.
	Tag string
	// Group is the producer group.
	Group string
	// Producers is the number of producer instances, each with its own
	// client instance and TCP connection, that share the load.
	Producers int
	// SendTimeout is the client's send timeout.
	SendTimeout time.Duration
	// Retries is the client's retry count for sync and oneway sends
	// (async sends are never retried by the client); <0 keeps the
	// client's default.
	Retries int
	// CompressOver is the body size from which the client compresses a
	// message (the client's default is 4096); 0 disables compression.
	CompressOver int
	// CreateTopic creates the topic with the admin API before sending.
	CreateTopic bool
	// TopicOptions are used when CreateTopic is set.
	TopicOptions CreateTopicOptions
	// SlowLog, when > 0, logs every send that took at least this long, with
	// its start time, on stderr (see Recorder.LogSlow).
	SlowLog time.Duration
	// RouteRetries bounds how often a sync or oneway send that failed on a
	// dead broker address (connection refused, reset or closed) or a missing
	// route is retried, each dead address with a fresh route from the name
	// server (reroute.go); 0 disables it. Async sends that fail so are
	// counted as errors, but renew the route too.
	RouteRetries int
	// Rate, when > 0, paces the run at that many messages a second (native client: pace.go).
	Rate float64
	// Serialize is the native client's request header encoding: SerializeJSON (the default,
	// what every client sends unless told otherwise) or SerializeRocketMQ, the binary header a
	// Java client sends with rocketmq.serialize.type=ROCKETMQ (cheaper to write and read).
	Serialize string
}

// Request header encodings of the native client (ProduceConfig.Serialize).
const (
	SerializeJSON     = "json"
	SerializeRocketMQ = "rocketmq"
)

// lockedWriter serializes writes to w, for writers several goroutines share.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// newSendRecorder is the Recorder of a produce run; it logs slow sends to
// stderr when cfg.SlowLog is set.
func newSendRecorder(cfg *ProduceConfig, stderr io.Writer) *Recorder {
	rec := NewRecorder()
	if cfg.SlowLog > 0 {
		rec.LogSlow(stderr, cfg.SlowLog)
	}
	return rec
}

// errorBackoff is how long a sending goroutine pauses after a failed send,
// so that a dead broker does not turn the tool into a busy loop.
const errorBackoff = 10 * time.Millisecond

// onewayLinger is how long oneway producers stay connected after the run.
const onewayLinger = time.Second

// sendBudget hands out the messages of a run limited by --messages.
type sendBudget struct {
	limit  int64 // <= 0: unlimited
	issued atomic.Int64
}

// take reserves up to k messages and returns how many were granted (0 when
// the budget is exhausted).
func (b *sendBudget) take(k int) int {
	if b.limit <= 0 {
		return k
	}
	n := b.issued.Add(int64(k))
	if n <= b.limit {
		return k
	}
	over := n - b.limit
	if over >= int64(k) {
		return 0
	}
	return k - int(over)
}

func (c *ProduceConfig) validate() error {
	switch c.Mode {
	case ModeSync, ModeAsync, ModeOneway:
	default:
		return fmt.Errorf("unknown mode %q (want sync, async or oneway)", c.Mode)
	}
	if c.Topic == "" {
		return fmt.Errorf("a topic is required")
	}
	if c.Size < 0 {
		return fmt.Errorf("size must not be negative")
	}
	if c.Concurrency < 1 {
		return fmt.Errorf("concurrency must be at least 1")
	}
	if c.Batch < 1 {
		return fmt.Errorf("batch must be at least 1")
	}
	if c.Producers < 1 {
		c.Producers = 1
	}
	if c.Producers > c.Concurrency {
		c.Producers = c.Concurrency
	}
	if c.Group == "" {
		c.Group = "mqbench_producer"
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = 3 * time.Second
	}
	if err := c.validateRate(); err != nil {
		return err
	}
	switch c.Serialize {
	case "", SerializeJSON:
	case SerializeRocketMQ:
		if c.Client != ClientNative {
			return fmt.Errorf("--serialize %s needs --client native", c.Serialize)
		}
	default:
		return fmt.Errorf("unknown --serialize %q (want %s or %s)", c.Serialize, SerializeJSON, SerializeRocketMQ)
	}
	return c.validateClient()
}

// RunProduce runs a producer benchmark until cfg.Duration has passed,
// cfg.Messages were sent, or ctx is cancelled, printing one line per
// interval and a summary. Per-interval lines and the human summary go to
// stdout, or to stderr when cfg.JSON is set, in which case stdout gets only
// the JSON summary line. Errors are printed to stderr. With cfg.Client
// ClientNative the official client is not used (see the package comment).
func RunProduce(ctx context.Context, cfg ProduceConfig, stdout, stderr io.Writer) (*Summary, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	stderr = &lockedWriter{w: stderr} // the reporter, the error log and the slow-send log share it
	if err := SetupClientLog(cfg.ClientLogLevel, cfg.ClientLogFile); err != nil {
		return nil, err
	}
	ns, err := ResolveNameServers(cfg.NameServers)
	if err != nil {
		return nil, err
	}
	if cfg.CreateTopic {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := CreateTopic(cctx, ns, cfg.Topic, cfg.TopicOptions)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	switch cfg.Client {
	case ClientNative:
		return runNativeProduce(ctx, cfg, ns, stdout, stderr)
	case ClientGRPC:
		if grpcClient.Produce == nil {
			return nil, fmt.Errorf("this build of the tool has no gRPC producer (mqbench has this repository's, mqbench5 the official 5.x client's)")
		}
		return grpcClient.Produce(ctx, cfg, stdout, stderr)
	}

	slots := make([]*producerSlot, 0, cfg.Producers)
	defer func() {
		if cfg.Mode == ModeOneway && len(slots) > 0 {
			// Oneway requests get no answer: give the broker time to read
			// what is still in flight, as closing a socket with unread
			// input resets it and the peer may drop the data.
			time.Sleep(onewayLinger)
		}
		var all []rocketmq.Producer
		for _, sl := range slots {
			all = append(all, sl.producers()...)
		}
		shutdownAll(all, stderr)
	}()
	compress := cfg.CompressOver
	if compress <= 0 {
		compress = math.MaxInt32
	}
	startProducer := func(i int) (rocketmq.Producer, error) {
		opts := []producer.Option{
			producer.WithNsResolver(nsResolver(ns)),
			producer.WithGroupName(cfg.Group),
			producer.WithInstanceName(instanceName("p", i)),
			producer.WithSendMsgTimeout(cfg.SendTimeout),
			producer.WithCompressMsgBodyOverHowmuch(compress),
		}
		if cfg.Retries >= 0 {
			opts = append(opts, producer.WithRetry(cfg.Retries))
		}
		p, err := rocketmq.NewProducer(opts...)
		if err != nil {
			return nil, fmt.Errorf("new producer: %w", err)
		}
		if err := p.Start(); err != nil {
			return nil, fmt.Errorf("start producer: %w", err)
		}
		return p, nil
	}
	for i := 0; i < cfg.Producers; i++ {
		p, err := startProducer(i)
		if err != nil {
			return nil, err
		}
		slots = append(slots, newProducerSlot(p, func() (rocketmq.Producer, error) { return startProducer(i) }, cfg.SendTimeout+time.Second, stderr))
	}

	body := make([]byte, cfg.Size)
	_, _ = crand.Read(body) // incompressible payload
	mk := func(n int) []*primitive.Message {
		msgs := make([]*primitive.Message, n)
		for i := range msgs {
			// A fresh Message per send: the client writes properties
			// (UNIQ_KEY, compression state) into the message it sends.
			m := primitive.NewMessage(cfg.Topic, body)
			if cfg.Tag != "" {
				m.WithTag(cfg.Tag)
			}
			if n > 1 {
				// The Go client sets UNIQ_KEY only on single messages;
				// give batched messages their own id as the Java client
				// does.
				m.WithProperty(primitive.PropertyUniqueClientMessageIdKeyIndex, primitive.CreateUniqID())
			}
			msgs[i] = m
		}
		return msgs
	}

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
	fmt.Fprintf(stderr, "mqbench produce: topic=%s mode=%s size=%d batch=%d concurrency=%d producers=%d namesrv=%v\n",
		cfg.Topic, cfg.Mode, cfg.Size, cfg.Batch, cfg.Concurrency, len(slots), ns)

	var (
		stopped atomic.Bool
		retried atomic.Uint64
		wg      sync.WaitGroup
		budget  = sendBudget{limit: cfg.Messages}
		sem     chan struct{}
	)
	fail := func(err error) {
		rec.RecordError()
		elog.Add(err)
	}
	// Prime every producer's route with one sync send before the load
	// starts. The client publishes a new route to its producers before it
	// records the broker addresses, so concurrent first sends can fail at
	// once with "route info not found". The priming sends are counted
	// (in the first interval) and taken from the --messages budget.
	for _, sl := range slots {
		if budget.take(1) == 0 {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			p, _ := sl.get()
			res, err := p.SendSync(context.Background(), mk(1)...)
			if err == nil && res.Status != primitive.SendOK {
				err = fmt.Errorf("send status %s", sendStatusName(res.Status))
			}
			if err != nil {
				fail(fmt.Errorf("priming send: %w", err))
				return
			}
			rec.RecordOp(time.Since(t0), 1, cfg.Size)
		}()
	}
	wg.Wait()

	finished := make(chan struct{})
	repDone := make(chan struct{})
	go func() { rep.run(finished); close(repDone) }()

	switch cfg.Mode {
	case ModeSync, ModeOneway:
		oneway := cfg.Mode == ModeOneway
		for g := 0; g < cfg.Concurrency; g++ {
			sl := slots[g%len(slots)]
			rt := &retrier{max: cfg.RouteRetries, stopped: &stopped, retried: &retried, renew: sl.renew}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stopped.Load() {
					n := budget.take(cfg.Batch)
					if n == 0 {
						return
					}
					t0 := time.Now()
					err := rt.do(func() (uint64, error) {
						p, gen := sl.get()
						msgs := mk(n) // a fresh Message per attempt (see mk)
						if oneway {
							return gen, p.SendOneWay(context.Background(), msgs...)
						}
						res, err := p.SendSync(context.Background(), msgs...)
						if err == nil && res.Status != primitive.SendOK {
							err = fmt.Errorf("send status %s", sendStatusName(res.Status))
						}
						return gen, err
					})
					lat := time.Since(t0)
					if err != nil {
						fail(err)
						time.Sleep(errorBackoff)
						continue
					}
					rec.RecordOp(lat, n, n*cfg.Size)
				}
			}()
		}
	case ModeAsync:
		sem = make(chan struct{}, cfg.Concurrency)
		for _, sl := range slots {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stopped.Load() {
					sem <- struct{}{} // a free in-flight slot
					if stopped.Load() {
						<-sem
						return
					}
					n := budget.take(cfg.Batch)
					if n == 0 {
						<-sem
						return
					}
					msgs := mk(n)
					p, gen := sl.get()
					t0 := time.Now()
					// The callback runs exactly once, on a client goroutine,
					// if and only if SendAsync returns nil; on timeout it
					// gets ErrRequestTimeout after SendTimeout.
					err := p.SendAsync(context.Background(), func(_ context.Context, res *primitive.SendResult, err error) {
						lat := time.Since(t0)
						if err == nil && (res == nil || res.Status != primitive.SendOK) {
							st := primitive.SendUnknownError
							if res != nil {
								st = res.Status
							}
							err = fmt.Errorf("send status %s", sendStatusName(st))
						}
						if err != nil {
							if classifySend(err) == failDeadAddress {
								go sl.renew(gen)
							}
							fail(err)
						} else {
							rec.RecordOp(lat, n, n*cfg.Size)
						}
						<-sem
					}, msgs...)
					if err != nil {
						if classifySend(err) == failDeadAddress {
							sl.renew(gen)
						}
						fail(err)
						<-sem
						time.Sleep(errorBackoff)
					}
				}
			}()
		}
	}

	workersDone := make(chan struct{})
	go func() { wg.Wait(); close(workersDone) }()
	waitForEnd(ctx, cfg.Duration, workersDone)
	stopped.Store(true)

	// Let in-flight sends finish so that they are counted; a send cannot
	// take much longer than SendTimeout per attempt.
	grace := cfg.SendTimeout*time.Duration(max(cfg.Retries, 3)+1) + 2*time.Second
	graceTimer := time.NewTimer(grace)
	defer graceTimer.Stop()
	select {
	case <-workersDone:
	case <-graceTimer.C:
		fmt.Fprintf(stderr, "warning: senders did not stop within %s\n", grace)
	}
	if sem != nil {
	drain:
		for i := 0; i < cap(sem); i++ {
			select {
			case sem <- struct{}{}:
			case <-graceTimer.C:
				fmt.Fprintf(stderr, "warning: %d async sends still in flight after %s\n", len(sem), grace)
				break drain
			}
		}
	}
	close(finished)
	<-repDone

	sum := &Summary{
		Kind: "produce", Mode: cfg.Mode, Topic: cfg.Topic,
		Size: cfg.Size, Batch: cfg.Batch, Concurrency: cfg.Concurrency,
		Latency: "send",
	}
	rep.win.summary(sum)
	sum.setRecovery(retried.Load(), rec.LongestGap(time.Now()))
	sum.TopErrors = elog.Top(5)
	printSummary(sum, cfg.JSON, summaryOut, stderr)
	return sum, nil
}

// printSummary prints the human summary (and the top errors) to out, or to
// stderr with the JSON line on out when asJSON is set.
func printSummary(s *Summary, asJSON bool, out, stderr io.Writer) {
	human := out
	if asJSON {
		human = stderr
	}
	fmt.Fprintln(human, FormatSummary(s))
	for _, e := range s.TopErrors {
		fmt.Fprintf(human, "  error: %s\n", e)
	}
	if asJSON {
		fmt.Fprintln(out, FormatSummaryJSON(s))
	}
}

// sendStatusName names a primitive.SendStatus.
func sendStatusName(s primitive.SendStatus) string {
	switch s {
	case primitive.SendOK:
		return "SEND_OK"
	case primitive.SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case primitive.SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case primitive.SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	default:
		return fmt.Sprintf("UNKNOWN(%d)", int(s))
	}
}

// shutdownAll shuts clients down, giving up after a few seconds: the
// summary has been printed already and a hung shutdown must not hang the
// tool.
func shutdownAll[T interface{ Shutdown() error }](cs []T, stderr io.Writer) {
	if len(cs) == 0 {
		return
	}
	done := make(chan struct{})
	go func() {
		for _, c := range cs {
			_ = c.Shutdown()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		fmt.Fprintln(stderr, "warning: client shutdown timed out")
	}
}

// waitForEnd blocks until a run should stop: ctx ends, d (if > 0) elapses,
// or done closes (producers spent their message budget, consumers received
// what they expected).
func waitForEnd(ctx context.Context, d time.Duration, done <-chan struct{}) {
	var deadline <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		deadline = t.C
	}
	select {
	case <-ctx.Done():
	case <-deadline:
	case <-done:
	}
}
