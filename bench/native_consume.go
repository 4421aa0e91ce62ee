package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// Native pull parameters.
const (
	// nativePullSysFlag asks the broker to hold a pull that finds nothing
	// (SUSPEND) and to use the subscription carried in the request
	// (SUBSCRIPTION), so that no heartbeat is needed. The commit bit is
	// clear: the benchmark keeps its offsets to itself.
	nativePullSysFlag = protocol.PullSuspend | protocol.PullSubscription
	// nativePullSuspend is how long the broker may hold a pull.
	nativePullSuspend = time.Second
	// nativePullErrorBackoff is the pause of a queue's poller after a
	// failed pull.
	nativePullErrorBackoff = 100 * time.Millisecond
)

// queryMaxOffset asks a broker for a queue's max offset (GET_MAX_OFFSET).
func queryMaxOffset(ctx context.Context, cl *remoting.Client, q nativeQueue, topic string) (int64, error) {
	ext := map[string]string{"topic": topic, "queueId": q.idStr}
	rctx, cancel := context.WithTimeout(ctx, nativeRPCTimeout)
	defer cancel()
	resp, err := cl.Invoke(rctx, q.addr, remoting.NewRequest(remoting.GetMaxOffset, ext, nil))
	if err != nil {
		return 0, err
	}
	if resp.Code != remoting.Success {
		return 0, fmt.Errorf("max offset of %s/%s/%d: %s (code %d): %s", topic, q.broker, q.id, responseCodeName(resp.Code), resp.Code, resp.Remark)
	}
	return resp.ExtInt64("offset")
}

// observeRecords counts the records of a pull body (stored layout,
// package message, back to back): one op, their messages and body bytes,
// and one end-to-end latency sample per message (now minus the record's
// born timestamp, ms resolution). It returns the number of records and an
// error if the body does not end with a complete record.
func (c *consumeCounter) observeRecords(body []byte) (int, error) {
	if len(body) == 0 {
		return 0, nil
	}
	nowUs := time.Now().UnixMicro()
	var (
		n   int
		err error
	)
	c.rec.RecordBatch(func(st *Stats) {
		var bytes int
		for len(body) > 0 {
			v, perr := message.ParseView(body)
			if perr != nil {
				err = fmt.Errorf("pull body: record %d: %w", n, perr)
				break
			}
			bytes += len(v.Body())
			st.Latency.Record(nowUs - v.BornTimestamp()*1000)
			n++
			body = body[v.Size():]
		}
		if n > 0 {
			st.Ops++
			st.Msgs += uint64(n)
			st.Bytes += uint64(bytes)
		}
	})
	c.add(n)
	return n, err
}

// resolveSubscribeQueues waits up to wait for the topic's route and returns
// its readable queues.
func resolveSubscribeQueues(ctx context.Context, cl *remoting.Client, ns []string, topic string, wait time.Duration, stderr io.Writer) ([]nativeQueue, error) {
	deadline := time.Now().Add(wait)
	for attempt := 0; ; attempt++ {
		rd, err := fetchRoute(ctx, cl, ns, topic)
		if err == nil {
			if qs := subscribeQueues(rd); len(qs) > 0 {
				return qs, nil
			}
			err = fmt.Errorf("the route of %s has no readable queue", topic)
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		if attempt == 0 {
			fmt.Fprintf(stderr, "topic %s has no usable route yet, retrying for up to %s: %v\n", topic, wait, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// runNativeConsume is RunConsume with the native client: one goroutine per
// queue pulls with PULL_MESSAGE (pipelined over Connections remoting
// clients), carrying its subscription in every request, from offset 0
// (--from first) or the queue's max offset (--from last), and counts what
// it gets. Offsets are neither read from nor committed to the broker.
func runNativeConsume(ctx context.Context, cfg ConsumeConfig, ns []string, stdout, stderr io.Writer) (*Summary, error) {
	defer lessGC()()
	cls := newRemotingClients(cfg.Connections)
	defer closeRemotingClients(cls)
	qs, err := resolveSubscribeQueues(ctx, cls[0], ns, cfg.Topic, cfg.WaitTopic, stderr)
	if err != nil {
		return nil, fmt.Errorf("route: %w", err)
	}
	qs = readFrom(qs, cfg.ReadAddr)
	start := make([]int64, len(qs))
	if cfg.From == "last" {
		for i, q := range qs {
			if start[i], err = queryMaxOffset(ctx, cls[i%len(cls)], q, cfg.Topic); err != nil {
				return nil, err
			}
		}
	}

	lines, summaryOut := stdout, stdout
	if cfg.JSON {
		lines = stderr
	}
	if cfg.Quiet {
		lines = nil
	}
	rec := NewRecorder()
	elog := newErrorLog(stderr, cfg.MaxPrintedErrors)
	cnt := &consumeCounter{rec: rec, expect: cfg.Expect, done: make(chan struct{})}
	fmt.Fprintf(stderr, "mqbench consume: client=native topic=%s group=%s from=%s pull-batch=%d queues=%d connections=%d namesrv=%v\n",
		cfg.Topic, cfg.Group, cfg.From, cfg.PullBatch, len(qs), len(cls), ns)
	rep := newReporter(rec, lines, "e2e", cfg.Interval, cfg.Warmup, true)
	finished := make(chan struct{})
	repDone := make(chan struct{})
	go func() { rep.run(finished); close(repDone) }()

	// runCtx ends held pulls at once when the run stops.
	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	var (
		stopped atomic.Bool
		wg      sync.WaitGroup
	)
	fail := func(err error) {
		rec.RecordError()
		elog.Add(err)
		select {
		case <-time.After(nativePullErrorBackoff):
		case <-runCtx.Done():
		}
	}
	for i, q := range qs {
		cl := cls[i%len(cls)]
		offset := start[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := protocol.PullMessageRequestHeader{
				ConsumerGroup:        cfg.Group,
				Topic:                cfg.Topic,
				QueueID:              q.id,
				MaxMsgNums:           int32(cfg.PullBatch),
				SysFlag:              nativePullSysFlag,
				SuspendTimeoutMillis: nativePullSuspend.Milliseconds(),
				Subscription:         cfg.Tag,
				ExpressionType:       "TAG",
			}
			for !stopped.Load() {
				h.QueueOffset = offset
				pctx, cancel := context.WithTimeout(runCtx, nativePullSuspend+nativeRPCTimeout)
				resp, err := cl.Invoke(pctx, q.addr, remoting.NewRequest(remoting.PullMessage, h.ToExt(), nil))
				cancel()
				if err != nil {
					if stopped.Load() || errors.Is(err, context.Canceled) {
						return
					}
					fail(fmt.Errorf("pull %s/%d: %w", q.broker, q.id, err))
					continue
				}
				switch resp.Code {
				case remoting.Success, remoting.PullNotFound, remoting.PullRetryImmediately, remoting.PullOffsetMoved:
				default:
					fail(fmt.Errorf("pull %s/%d: %s (code %d): %s", q.broker, q.id, responseCodeName(resp.Code), resp.Code, resp.Remark))
					continue
				}
				next, err := resp.ExtInt64("nextBeginOffset")
				if err != nil {
					fail(fmt.Errorf("pull %s/%d: %s without nextBeginOffset: %w", q.broker, q.id, responseCodeName(resp.Code), err))
					continue
				}
				if resp.Code == remoting.Success {
					if _, err := cnt.observeRecords(resp.Body); err != nil {
						rec.RecordError()
						elog.Add(fmt.Errorf("%s/%d offset %d: %w", q.broker, q.id, offset, err))
					}
				}
				offset = next
			}
		}()
	}

	waitForEnd(ctx, cfg.Duration, cnt.done)
	stopped.Store(true)
	cancelRun()
	wg.Wait()
	close(finished)
	<-repDone

	sum := &Summary{Kind: "consume", Mode: ConsumerPull, Client: ClientNative, Topic: cfg.Topic, Latency: "end_to_end"}
	rep.win.summary(sum)
	sum.TopErrors = elog.Top(5)
	printSummary(sum, cfg.JSON, summaryOut, stderr)
	return sum, nil
}
