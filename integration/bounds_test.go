package integration

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// procStatusKB reads a "<field>: <n> kB" line of /proc/<pid>/status.
func procStatusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read /proc/%d/status: %v", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s line %q: %v", field, line, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// pidOf is the running process's PID.
func pidOf(p *proc) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// unreadRSSBoundMiB is the growth of the broker's peak RSS (VmHWM over VmRSS before) allowed while
// a peer pipelines 100k requests (200 MB of frames) and reads none of its answers. Before the
// per-connection bound it grew by about a gigabyte; with it, the connection stops being read at
// 1,024 unanswered requests, so the growth is a few MiB plus the Go runtime's slack.
const unreadRSSBoundMiB = 100

// A peer pipelining 100k requests on a connection whose answers it never reads is not read
// beyond the per-connection bound: the broker's RSS stays within unreadRSSBoundMiB of where it
// was, and other clients are served meanwhile.
func TestUnreadPipelinedRequestsKeepBrokerRSSBounded(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	pid := pidOf(c.b.proc)
	before := procStatusKB(t, pid, "VmRSS")

	const n = 100_000
	body := bytes.Repeat([]byte("x"), 2048)
	ext := map[string]string{"topic": "TBW102", "queueId": "0"}
	nc, err := net.Dial("tcp", c.b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// The writer stops when the broker stops reading (its socket buffers fill) or at the deadline.
	_ = nc.SetWriteDeadline(time.Now().Add(8 * time.Second))
	w := bufio.NewWriterSize(nc, 256<<10)
	sent := 0
	for ; sent < n; sent++ {
		if _, err := w.Write(encodeRequest(codeGetMaxOffset, int32(sent+1), ext, body)); err != nil {
			break
		}
	}
	_ = w.Flush()
	time.Sleep(time.Second)
	if _, err := rawRequest(c.b.addr, codeGetMaxOffset, ext, nil, 5*time.Second); err != nil {
		t.Fatalf("another client was not served while the flood waited: %v", err)
	}
	peak := procStatusKB(t, pid, "VmHWM")
	growth := (peak - before) / 1024
	t.Logf("pipelined %d of %d requests (%d MB) before the broker stopped reading; VmRSS before %d MiB, peak %d MiB, growth %d MiB (bound %d MiB)",
		sent, n, sent*len(encodeRequest(codeGetMaxOffset, 1, ext, body))>>20, before/1024, peak/1024, growth, unreadRSSBoundMiB)
	if sent == n {
		t.Errorf("the broker read all %d requests of a peer that reads no answers", n)
	}
	if growth > unreadRSSBoundMiB {
		t.Fatalf("broker peak RSS grew by %d MiB, bound %d MiB", growth, unreadRSSBoundMiB)
	}
}

// headerFloodRSSBoundMiB is the growth of the name server's peak RSS allowed while 24
// connections send frames with a million header fields each (which once took it to 2.8 GB) and
// 24 more send headers just under the size cap packed with fields.
const headerFloodRSSBoundMiB = 64

// Frames whose headers carry a million fields (binary) or tens of thousands (JSON, within the
// size cap) are refused while parsing: the name server closes those connections, its RSS stays
// bounded, and it answers other clients throughout.
func TestFieldFloodHeadersRefusedByNameServer(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	pid := pidOf(ns.proc)
	before := procStatusKB(t, pid, "VmRSS")

	ext := make([]byte, 0, 7_000_000)
	for range 1_000_000 {
		ext = append(ext, 0, 1, 'k', 0, 0, 0, 0)
	}
	bin := []byte{0, 105, 9, 1, 61, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	bin = binary.BigEndian.AppendUint32(bin, uint32(len(ext)))
	bin = append(bin, ext...)
	var js bytes.Buffer
	js.WriteString(`{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"extFields":{`)
	for i := 0; js.Len() < 250_000; i++ {
		if i > 0 {
			js.WriteByte(',')
		}
		fmt.Fprintf(&js, `"%d":""`, i)
	}
	js.WriteString(`}}`)
	frames := [][]byte{frame(1, bin, nil), frame(0, js.Bytes(), nil)}

	var wg sync.WaitGroup
	errs := make(chan error, 48)
	for i := range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", ns.addr)
			if err != nil {
				errs <- err
				return
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
			_, _ = nc.Write(frames[i%2]) // the server may close before taking it all
			if _, err := readFrame(nc); err == nil {
				errs <- fmt.Errorf("frame %d was answered", i)
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				errs <- fmt.Errorf("frame %d: connection left open: %v", i, err)
			}
		}()
	}
	alive := make(chan error, 1)
	go func() { alive <- namesrvAlive(ns.addr) }()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := <-alive; err != nil {
		t.Fatalf("name server did not answer another client during the flood: %v", err)
	}
	if err := namesrvAlive(ns.addr); err != nil {
		t.Fatalf("name server did not answer after the flood: %v", err)
	}
	peak := procStatusKB(t, pid, "VmHWM")
	growth := (peak - before) / 1024
	t.Logf("name server VmRSS before %d MiB, peak %d MiB, growth %d MiB (bound %d MiB)", before/1024, peak/1024, growth, headerFloodRSSBoundMiB)
	if growth > headerFloodRSSBoundMiB {
		t.Fatalf("name server peak RSS grew by %d MiB, bound %d MiB", growth, headerFloodRSSBoundMiB)
	}
}

// A pull asking to be held for 24.8 days (suspendTimeoutMillis = 2^31-1) on an empty queue is
// answered PULL_NOT_FOUND once longPollingMaxMillis (here 2 s; 60 s by default) has passed.
func TestLongPollHoldCapped(t *testing.T) {
	t.Parallel()
	c := startCluster(t, withProp("longPollingMaxMillis", "2000"))
	topic := uniq("Hold")
	if resp, err := sendRaw(c.b.addr, topic, 0, []byte("create"), ""); err != nil || resp.Code != respSuccess {
		t.Fatalf("create the topic: %v %+v", err, resp)
	}
	start := time.Now()
	resp, err := rawRequest(c.b.addr, codePullMessage, map[string]string{
		"consumerGroup": uniq("GHold"), "topic": topic, "queueId": "0", "queueOffset": "1", "maxMsgNums": "32",
		"sysFlag":      "6", // subscription in the request, suspend
		"commitOffset": "0", "suspendTimeoutMillis": "2147483647", "subscription": "*", "subVersion": "0",
		"expressionType": "TAG",
	}, nil, 20*time.Second)
	held := time.Since(start)
	if err != nil {
		t.Fatalf("held pull: %v (after %v)", err, held)
	}
	t.Logf("a pull asking for 2147483647 ms was answered code %d after %v", resp.Code, held)
	if resp.Code != respPullNotFound {
		t.Fatalf("held pull answered code %d %q, want PULL_NOT_FOUND", resp.Code, resp.Remark)
	}
	if held < 1500*time.Millisecond || held > 10*time.Second {
		t.Fatalf("held pull answered after %v, want about 2 s (longPollingMaxMillis)", held)
	}
}

// slowFramesAllocBoundMiB bounds what the broker allocates (go_memstats_alloc_bytes_total, which
// counts every allocation whether or not it is still live) while 200 connections announce
// 16 MiB frames and send 1 KiB of each. Allocating the announced length up front cost 3.2 GB;
// buffers grown as bytes arrive cost 64 KiB per connection.
const slowFramesAllocBoundMiB = 256

// Slow connections announcing 16 MiB frames cost what they sent, not what they announced.
func TestSlowLargeFramesDoNotAllocateAnnouncedLength(t *testing.T) {
	t.Parallel()
	httpPort := freePort(t)
	c := startCluster(t, withProp("httpPort", strconv.Itoa(httpPort)))
	url := "http://127.0.0.1:" + strconv.Itoa(httpPort) + "/metrics"
	allocated := func() float64 {
		t.Helper()
		ss, err := scrapeMetrics(url)
		if err != nil {
			t.Fatal(err)
		}
		s := find(ss, "go_memstats_alloc_bytes_total", nil)
		if len(s) != 1 {
			t.Fatalf("go_memstats_alloc_bytes_total: %d samples", len(s))
		}
		return s[0].value
	}
	before := allocated()
	const conns = 200
	head := make([]byte, 8, 8+1024)
	binary.BigEndian.PutUint32(head, 16<<20-4)
	binary.BigEndian.PutUint32(head[4:], 2) // a JSON header of 2 bytes
	head = append(head, '{', '}')
	head = append(head, make([]byte, 1022)...)
	for range conns {
		nc, err := net.Dial("tcp", c.b.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if _, err := nc.Write(head); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // let the broker read what was sent
	if _, err := rawRequest(c.b.addr, codeGetMaxOffset, map[string]string{"topic": "TBW102", "queueId": "0"}, nil, 5*time.Second); err != nil {
		t.Fatalf("another client was not served: %v", err)
	}
	grew := (allocated() - before) / (1 << 20)
	t.Logf("%d connections announcing 16 MiB and sending 1 KiB: the broker allocated %.1f MiB meanwhile (bound %d MiB)", conns, grew, slowFramesAllocBoundMiB)
	if grew > slowFramesAllocBoundMiB {
		t.Fatalf("the broker allocated %.1f MiB for %d slow frames, bound %d MiB", grew, conns, slowFramesAllocBoundMiB)
	}
}
