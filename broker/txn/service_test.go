package txn

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rocketraft/broker/internal/storetest"
	"rocketraft/broker/meta"
	"rocketraft/message"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// producer records the check-backs sent to it.
type producer struct {
	mu   sync.Mutex
	reqs []*remoting.Command
	fail error
}

func (p *producer) InvokeOneway(req *remoting.Command) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != nil {
		return p.fail
	}
	p.reqs = append(p.reqs, req)
	return nil
}

func (p *producer) RemoteAddr() string { return "127.0.0.1:5555" }

func (p *producer) count() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.reqs) }

// rig is a Service over a store in a temporary directory, with an in-memory offset table, a
// settable clock and master flag, and one producer of group PG.
type rig struct {
	st   *storage.Store
	s    *Service
	prod *producer

	mu        sync.Mutex
	now       time.Time
	master    bool
	live      bool // PG has a live producer
	offsets   map[string]int64
	ensured   int
	appendErr error
}

func newRig(t *testing.T, checkMax int) *rig {
	t.Helper()
	r := &rig{st: storetest.Open(t), prod: &producer{}, now: time.UnixMilli(1_800_000_000_000), master: true, live: true, offsets: map[string]int64{}}
	r.s = r.service(checkMax)
	return r
}

// service builds a Service over the rig's store and tables (a restart builds a second one).
func (r *rig) service(checkMax int) *Service {
	key := func(group, topic string, qid int32) string { return group + "@" + topic + "@" + strconv.Itoa(int(qid)) }
	return New(Config{
		Acquire: storetest.Acquire(r.st),
		Append: func(ctx context.Context, records [][]byte) ([]storage.AppendResult, error) {
			r.mu.Lock()
			err := r.appendErr
			r.mu.Unlock()
			if err != nil {
				return nil, err
			}
			return r.st.Append(ctx, records)
		},
		IsMaster: func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.master },
		CommittedOffset: func(group, topic string, qid int32) (int64, bool) {
			r.mu.Lock()
			defer r.mu.Unlock()
			off, ok := r.offsets[key(group, topic, qid)]
			return off, ok
		},
		CommitOffset: func(group, topic string, qid int32, off int64) {
			r.mu.Lock()
			r.offsets[key(group, topic, qid)] = off
			r.mu.Unlock()
		},
		EnsureCheckMaxTopic: func() error { r.mu.Lock(); r.ensured++; r.mu.Unlock(); return nil },
		ProducerConn: func(group string) Producer {
			r.mu.Lock()
			defer r.mu.Unlock()
			if group == "PG" && r.live {
				return r.prod
			}
			return nil
		},
		StoreHost:    func() netip.AddrPort { return storetest.Host },
		CheckTimeout: 6 * time.Second,
		CheckMax:     checkMax,
		Now:          func() time.Time { r.mu.Lock(); defer r.mu.Unlock(); return r.now },
	})
}

func (r *rig) advance(d time.Duration) { r.mu.Lock(); r.now = r.now.Add(d); r.mu.Unlock() }

// half stores a half message as the send path leaves one (real topic T queue 1, group PG) and
// returns its queue and commitlog offsets.
func (r *rig) half(t *testing.T, body string, extra map[string]string) (int64, int64) {
	t.Helper()
	p := map[string]string{message.PropertyRealTopic: "T", message.PropertyRealQueueID: "1", message.PropertyProducerGroup: "PG",
		message.PropertyTransactionPrepared: "true", message.PropertyUniqClientMessageID: "U-" + body}
	for k, v := range extra {
		p[k] = v
	}
	res := storetest.Put(t, r.st, &message.Message{Topic: meta.TransHalfTopic, BornTimestamp: r.now.UnixMilli(), StoreTimestamp: r.now.UnixMilli(),
		Body: []byte(body), Properties: message.FormatProperties(p)})
	return res.QueueOffset, res.PhysicalOffset
}

func (r *rig) end(t *testing.T, group string, off, phys int64, state int32) (int32, string) {
	t.Helper()
	code, remark, err := r.s.End(context.Background(), &EndRequest{ProducerGroup: group, TranStateTableOffset: off, CommitLogOffset: phys, CommitOrRollback: state})
	if err != nil {
		t.Fatal(err)
	}
	return code, remark
}

func bodies(ms []*message.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Body))
	}
	return out
}

// TestEndCommitAndRollback: commit appends the real message (real topic and queue back, COMMIT,
// PREPAREDTRANSACTIONOFFSET the half's offset) and an op record; rollback only the op record; a
// second answer writes nothing; the cursor moves past resolved halves.
func TestEndCommitAndRollback(t *testing.T) {
	r := newRig(t, 15)
	o0, p0 := r.half(t, "a", nil)
	o1, p1 := r.half(t, "b", nil)
	if code, remark := r.end(t, "PG", o0, p0, message.TransactionCommitType); code != remoting.Success {
		t.Fatalf("commit: %d %s", code, remark)
	}
	real := storetest.Read(t, r.st, "T", 1)
	if len(real) != 1 {
		t.Fatalf("real topic %v", bodies(real))
	}
	m := real[0]
	p := message.ParseProperties(m.Properties)
	if string(m.Body) != "a" || m.PreparedTransactionOffset != p0 || p[message.PropertyTransactionPrepared] != "" || p[message.PropertyRealTopic] != "" ||
		p[message.PropertyTranPreparedQueueOffset] != "0" || m.SysFlag&message.TransactionTypeMask != message.TransactionCommitType || m.StoreHost != storetest.Host {
		t.Fatalf("committed message %+v props %v", m, p)
	}
	if code, _ := r.end(t, "PG", o1, p1, message.TransactionRollbackType); code != remoting.Success {
		t.Fatal("rollback")
	}
	if ops := storetest.Read(t, r.st, meta.TransOpHalfTopic, 0); len(ops) != 2 || string(ops[0].Body) != "0" || string(ops[1].Body) != "1" {
		t.Fatalf("op records %v", bodies(ops))
	}
	code, remark := r.end(t, "PG", o0, p0, message.TransactionCommitType)
	if code != remoting.Success || remark == "" || len(storetest.Read(t, r.st, "T", 1)) != 1 {
		t.Fatalf("second commit: %d %q, real %d", code, remark, len(storetest.Read(t, r.st, "T", 1)))
	}
	if n, err := r.s.Unresolved(); err != nil || n != 0 {
		t.Fatalf("unresolved %d %v", n, err)
	}
	if cur := r.offsets[Group+"@"+meta.TransHalfTopic+"@0"]; cur != 2 {
		t.Fatalf("cursor %d, want 2", cur)
	}
}

// TestEndRefusesMismatches: a wrong group, queue offset or commitlog offset, or a record that is
// not a half message, is SYSTEM_ERROR with RocketMQ's remark, and writes nothing.
func TestEndRefusesMismatches(t *testing.T) {
	r := newRig(t, 15)
	o, p := r.half(t, "a", nil)
	other := storetest.Put(t, r.st, &message.Message{Topic: "T", QueueID: 1, Body: []byte("plain")})
	for name, c := range map[string]struct {
		group     string
		off, phys int64
		want      string
	}{
		"group":     {"OTHER", o, p, "The producer group wrong"},
		"offset":    {"PG", o + 5, p, "The transaction state table offset wrong"},
		"not half":  {"PG", 0, other.PhysicalOffset, "not a half message"},
		"no record": {"PG", 0, 1 << 40, "Find prepared transaction message failed"},
	} {
		code, remark := r.end(t, c.group, c.off, c.phys, message.TransactionCommitType)
		if code != remoting.SystemError || !contains(remark, c.want) {
			t.Errorf("%s: %d %q, want SYSTEM_ERROR %q", name, code, remark, c.want)
		}
	}
	if ops := storetest.Read(t, r.st, meta.TransOpHalfTopic, 0); len(ops) != 0 {
		t.Fatalf("op records written: %v", bodies(ops))
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestEndAppendError: an append failure is returned as an error (the broker maps it), and the
// transaction stays unresolved.
func TestEndAppendError(t *testing.T) {
	r := newRig(t, 15)
	o, p := r.half(t, "a", nil)
	r.appendErr = errors.New("no quorum")
	if _, _, err := r.s.End(context.Background(), &EndRequest{ProducerGroup: "PG", TranStateTableOffset: o, CommitLogOffset: p, CommitOrRollback: message.TransactionCommitType}); err == nil {
		t.Fatal("no error")
	}
	if n, _ := r.s.Unresolved(); n != 1 {
		t.Fatalf("unresolved %d, want 1", n)
	}
}

// TestCheckBackRePutsAndAsks: a half older than the timeout is re-put (a copy with a check count
// and its origin, an op for the old half) and the producer is asked about the copy; the
// producer's late answer naming the first half resolves the copy.
func TestCheckBackRePutsAndAsks(t *testing.T) {
	r := newRig(t, 15)
	o, p := r.half(t, "a", map[string]string{message.PropertyTransactionID: "TX-1"})
	r.s.CheckPass(nil)
	if len(r.prod.reqs) != 0 {
		t.Fatal("a young half was checked")
	}
	r.advance(6 * time.Second)
	r.s.CheckPass(nil)
	if len(r.prod.reqs) != 1 {
		t.Fatalf("%d check-backs, want 1", len(r.prod.reqs))
	}
	req := r.prod.reqs[0]
	halves := storetest.Read(t, r.st, meta.TransHalfTopic, 0)
	if len(halves) != 2 {
		t.Fatalf("half queue %v", bodies(halves))
	}
	cp := message.ParseProperties(halves[1].Properties)
	if cp[message.PropertyTransactionCheckTimes] != "1" || cp[message.PropertyTranPreparedQueueOffset] != "0" {
		t.Fatalf("copy props %v", cp)
	}
	if req.Code != remoting.CheckTransactionState || req.Ext("tranStateTableOffset") != "1" ||
		req.Ext("commitLogOffset") != strconv.FormatInt(halves[1].PhysicalOffset, 10) || req.Ext("msgId") != "U-a" || req.Ext("transactionId") != "TX-1" {
		t.Fatalf("check header %v", req.ExtFields)
	}
	body, _, err := message.DecodeRecord(req.Body)
	if err != nil || body.Topic != "T" || body.QueueID != 1 || body.QueueOffset != 1 {
		t.Fatalf("check body %+v %v", body, err)
	}
	// The copy keeps the half's born time, so the next pass asks again (about a new copy).
	r.s.CheckPass(nil)
	if len(r.prod.reqs) != 2 || r.prod.reqs[1].Ext("tranStateTableOffset") != "2" {
		t.Fatalf("second pass: %d check-backs", len(r.prod.reqs))
	}
	if code, _ := r.end(t, "PG", o, p, message.TransactionCommitType); code != remoting.Success {
		t.Fatal("late answer refused")
	}
	real := storetest.Read(t, r.st, "T", 1)
	if len(real) != 1 || message.ParseProperties(real[0].Properties)[message.PropertyTranPreparedQueueOffset] != "0" {
		t.Fatalf("real %v", bodies(real))
	}
	if n, _ := r.s.Unresolved(); n != 0 {
		t.Fatalf("unresolved %d", n)
	}
}

// TestCheckBackWithoutProducerAndDiscard: with no live producer a due half is skipped (not
// counted); after CheckMax check-backs it is discarded to TRANS_CHECK_MAX_TIME_TOPIC; a half
// without PGROUP is discarded at once.
func TestCheckBackWithoutProducerAndDiscard(t *testing.T) {
	r := newRig(t, 1)
	r.half(t, "a", nil)
	r.half(t, "orphan", map[string]string{message.PropertyProducerGroup: ""})
	r.live = false
	r.advance(7 * time.Second)
	r.s.CheckPass(nil)
	if len(r.prod.reqs) != 0 || r.ensured != 1 {
		t.Fatalf("check-backs %d ensured %d, want 0 1", len(r.prod.reqs), r.ensured)
	}
	if got := bodies(storetest.Read(t, r.st, meta.TransCheckMaxTimeTopic, 0)); len(got) != 1 || got[0] != "orphan" {
		t.Fatalf("discarded %v, want the orphan only", got)
	}
	r.live = true
	r.s.CheckPass(nil)
	if len(r.prod.reqs) != 1 {
		t.Fatalf("check-backs %d, want 1", len(r.prod.reqs))
	}
	r.advance(7 * time.Second)
	r.s.CheckPass(nil)
	got := bodies(storetest.Read(t, r.st, meta.TransCheckMaxTimeTopic, 0))
	if len(got) != 2 || got[1] != "a" || len(r.prod.reqs) != 1 {
		t.Fatalf("discarded %v, check-backs %d", got, len(r.prod.reqs))
	}
	if n, _ := r.s.Unresolved(); n != 0 {
		t.Fatalf("unresolved %d", n)
	}
}

// TestCheckPassStops: a pass stops when this node is no longer the master, when stop is closed,
// and at the first failed append.
func TestCheckPassStops(t *testing.T) {
	r := newRig(t, 15)
	r.half(t, "a", nil)
	r.half(t, "b", nil)
	r.advance(7 * time.Second)
	r.master = false
	r.s.CheckPass(nil)
	stop := make(chan struct{})
	close(stop)
	r.master = true
	r.s.CheckPass(stop)
	if len(r.prod.reqs) != 0 {
		t.Fatalf("%d check-backs from a stopped pass", len(r.prod.reqs))
	}
	r.appendErr = errors.New("leadership lost")
	r.s.CheckPass(nil)
	if len(r.prod.reqs) != 0 {
		t.Fatal("asked without a re-put")
	}
	r.appendErr = nil
	r.prod.fail = errors.New("connection reset")
	r.s.CheckPass(nil) // a failed send is logged; the pass goes on
	if halves := storetest.Read(t, r.st, meta.TransHalfTopic, 0); len(halves) != 4 {
		t.Fatalf("half queue %v, want both re-put", bodies(halves))
	}
}

// TestRebuildFromCursor: a new service (a restart, a new leader) starts at the committed cursor
// and knows the same unresolved halves; the op queue is read from after the cursor's half.
func TestRebuildFromCursor(t *testing.T) {
	r := newRig(t, 15)
	for i := range 4 {
		r.half(t, strconv.Itoa(i), nil)
	}
	for off := int64(0); off < 2; off++ {
		phys := storetest.Read(t, r.st, meta.TransHalfTopic, 0)[off].PhysicalOffset
		if code, _ := r.end(t, "PG", off, phys, message.TransactionRollbackType); code != remoting.Success {
			t.Fatal("rollback")
		}
	}
	if _, err := r.s.Unresolved(); err != nil { // the refresh that commits the cursor
		t.Fatal(err)
	}
	if cur := r.offsets[Group+"@"+meta.TransHalfTopic+"@0"]; cur != 2 {
		t.Fatalf("cursor %d", cur)
	}
	s2 := r.service(15)
	if n, err := s2.Unresolved(); err != nil || n != 2 {
		t.Fatalf("rebuilt: %d unresolved (%v), want 2", n, err)
	}
	if s2.book.halfNext != 4 || s2.book.low() != 2 {
		t.Fatalf("rebuilt book halfNext %d low %d", s2.book.halfNext, s2.book.low())
	}
}

// TestClaimSerialisesAnswers: a second claim of one transaction waits for the first, gives up at
// its context's end, and tryClaim does not wait.
func TestClaimSerialisesAnswers(t *testing.T) {
	r := newRig(t, 15)
	release, err := r.s.claim(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	if r.s.tryClaim(7) != nil {
		t.Fatal("tryClaim took a held claim")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := r.s.claim(ctx, 7); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("claim of a held transaction: %v", err)
	}
	got := make(chan struct{})
	go func() {
		rel, err := r.s.claim(context.Background(), 7)
		if err == nil {
			rel()
		}
		close(got)
	}()
	release()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting claim was not granted after release")
	}
}

// TestRunChecksWhileMaster: Run's passes check back due halves only while this node is the
// master, and Run returns when stop closes.
func TestRunChecksWhileMaster(t *testing.T) {
	r := newRig(t, 15)
	r.s.cfg.CheckInterval = 10 * time.Millisecond
	r.half(t, "a", nil)
	r.advance(7 * time.Second)
	r.mu.Lock()
	r.master = false
	r.mu.Unlock()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { r.s.Run(stop); close(done) }()
	time.Sleep(50 * time.Millisecond)
	if n := r.prod.count(); n != 0 {
		t.Fatalf("%d check-backs while not the master", n)
	}
	r.mu.Lock()
	r.master = true
	r.mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); r.prod.count() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no check-back from Run")
		}
	}
	close(stop)
	<-done
}
