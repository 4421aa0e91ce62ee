package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestCrashUnderLoadLosesNoAckedMessage (i): kill -9 of the broker while several goroutines
// SendSync, then restart on the same data directory. Run for SYNC_FLUSH and ASYNC_FLUSH (a
// process crash keeps the OS page cache, so even ASYNC_FLUSH must not lose what it
// acknowledged).
//
// Afterwards, reading every queue from 0 to its max offset (raw pulls, see readAll):
//   - every send acknowledged SEND_OK is there exactly once (the producer does not retry, so a
//     second copy could only come from the broker);
//   - a send that was not acknowledged is there at most once (it may have been stored before
//     the crash; its acknowledgement was lost);
//   - nothing else is there, and queue offsets are dense from 0;
//   - a push consumer of a new group receives exactly the stored messages;
//   - new sends are appended after the recovered messages.
//
// Then the broker is stopped and its data directory is checked offline: consume queues and
// commitlog agree in both directions (checkStore). Small commitlog (256 KiB) and consume-queue
// (100 units) files make the load cross several file boundaries.
func TestCrashUnderLoadLosesNoAckedMessage(t *testing.T) {
	t.Parallel()
	for _, flush := range []string{"SYNC_FLUSH", "ASYNC_FLUSH"} {
		t.Run(flush, func(t *testing.T) {
			t.Parallel()
			crashUnderLoad(t, flush)
		})
	}
}

func crashUnderLoad(t *testing.T, flush string) {
	c := startCluster(t,
		withProp("flushDiskType", flush),
		withProp("mappedFileSizeCommitLog", strconv.Itoa(256<<10)),
		withProp("mapedFileSizeConsumeQueue", strconv.Itoa(100*20)),
		withProp("maxMessageSize", strconv.Itoa(64<<10)),
	)
	topic := uniq("Crash" + strings.ReplaceAll(flush, "_", ""))
	p := newProducer(t, c, producer.WithRetry(0))
	pad := strings.Repeat("x", 150)
	sendSync(t, p, topic, "warmup", 1, func(_ int, m *primitive.Message) { m.WithTag("TagK") }) // creates the topic

	const senders = 8
	var (
		mu       sync.Mutex
		acked    = map[string]bool{"warmup-0": true}
		tried    = map[string]bool{"warmup-0": true}
		nAcked   atomic.Int64
		stop     atomic.Bool
		wg       sync.WaitGroup
		sendErrs atomic.Int64
	)
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				body := fmt.Sprintf("g%d-%d-%s", g, i, pad)
				m := primitive.NewMessage(topic, []byte(body))
				m.WithTag("TagK")
				m.WithKeys([]string{fmt.Sprintf("k%d-%d", g, i)})
				mu.Lock()
				tried[body] = true
				mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				r, err := p.SendSync(ctx, m)
				cancel()
				if err == nil && r.Status == primitive.SendOK {
					mu.Lock()
					acked[body] = true
					mu.Unlock()
					nAcked.Add(1)
				} else if sendErrs.Add(1); stop.Load() {
					return
				}
			}
		}()
	}
	eventually(t, 60*time.Second, "load acknowledged before the crash", func() error {
		if n := nAcked.Load(); n < 1500 {
			return fmt.Errorf("%d sends acknowledged (%d errors)", n, sendErrs.Load())
		}
		return nil
	})
	c.b.kill() // SIGKILL while the senders keep going
	stop.Store(true)
	waitGroup(t, &wg, 30*time.Second, "senders stop after the crash")
	t.Logf("%s: %d acknowledged, %d attempted, %d send errors before/at the crash",
		flush, len(acked), len(tried), sendErrs.Load())

	c.b.restart()
	byQueue := readAll(t, c, topic)
	seen := map[string]int{}
	for q, msgs := range byQueue {
		for i, m := range msgs {
			if m.QueueOffset != int64(i) {
				t.Fatalf("queue %d: message #%d has queue offset %d; offsets must stay dense across a crash", q, i, m.QueueOffset)
			}
			seen[string(m.Body)]++
		}
	}
	var lost, dupAcked, dupUnacked, unknown []string
	for b := range acked {
		switch seen[b] {
		case 0:
			lost = append(lost, b)
		case 1:
		default:
			dupAcked = append(dupAcked, b)
		}
	}
	for b, n := range seen {
		switch {
		case !tried[b]:
			unknown = append(unknown, b)
		case !acked[b] && n > 1:
			dupUnacked = append(dupUnacked, b)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%s: %d acknowledged message(s) lost after kill -9 and restart: %s", flush, len(lost), firstFew(trimPad(lost)))
	}
	if len(dupAcked)+len(dupUnacked) > 0 {
		t.Errorf("%s: stored more than once (producer retries are off): acknowledged %s, unacknowledged %s",
			flush, firstFew(trimPad(dupAcked)), firstFew(trimPad(dupUnacked)))
	}
	if len(unknown) > 0 {
		t.Errorf("%s: %d message(s) that were never sent: %s", flush, len(unknown), firstFew(trimPad(unknown)))
	}
	t.Logf("%s: %d messages readable after restart (%d acknowledged, %d unacknowledged but stored)",
		flush, len(seen), len(acked), len(seen)-len(acked))

	// The official client consumes exactly what is stored, too.
	stored := recBodies(flatten(byQueue))
	pc := startPushConsumer(t, c, uniq("GCrash"), topic, all)
	eventually(t, 60*time.Second, "a push consumer receives every stored message", func() error {
		return countErr("push consumer", pc.got.count(), len(stored))
	})
	pc.shutdown()
	if d := diffBodies(stored, pc.got.snapshot()); len(d.missing)+len(d.extra)+len(d.dups) > 0 {
		t.Errorf("%s: push consumer after the restart: %s", flush, d)
	}

	// The restarted broker must take new writes after the recovered data (a new producer: the
	// old one's connection died with the broker).
	after := sendSync(t, newProducer(t, c), topic, "after", 4, func(_ int, m *primitive.Message) { m.WithTag("TagK") })
	for _, s := range after {
		if s.offset != int64(len(byQueue[s.queue]))+countBefore(after, s) {
			t.Errorf("send after restart got queue %d offset %d; queue held %d messages", s.queue, s.offset, len(byQueue[s.queue]))
		}
	}

	if err := c.b.stop(); err != nil {
		t.Fatalf("stopping the broker for the offline check: %v", err)
	}
	counts, problems := checkStore(c.b.storeRoot, topic)
	if files, err := readSegments(filepath.Join(c.b.storeRoot, "commitlog")); err == nil {
		t.Logf("%s: offline check of %d commitlog files, consume-queue units per queue %v", flush, len(files), counts)
	}
	for _, p := range problems {
		t.Errorf("offline check of %s: %s", c.b.storeRoot, p)
	}
	for q, msgs := range byQueue {
		if want := len(msgs) + int(countQueue(after, q)); counts[q] != want {
			t.Errorf("offline check: queue %d has %d consume-queue units, %d messages were readable", q, counts[q], want)
		}
	}
}

// countBefore counts the earlier sends in s that went to the same queue as x.
func countBefore(s []sent, x sent) int64 {
	var n int64
	for _, y := range s {
		if y == x {
			break
		}
		if y.queue == x.queue {
			n++
		}
	}
	return n
}

func countQueue(s []sent, q int) int64 {
	var n int64
	for _, y := range s {
		if y.queue == q {
			n++
		}
	}
	return n
}

// trimPad shortens bodies for messages.
func trimPad(s []string) []string {
	out := make([]string, len(s))
	for i, b := range s {
		out[i], _, _ = strings.Cut(b, "-x")
	}
	return out
}
