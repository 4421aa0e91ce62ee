package remoting

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// millionFieldsBinary is a ROCKETMQ header of a million one-byte-key extFields, as the frames
// that pushed the name server to 2.8 GB carried.
func millionFieldsBinary() []byte {
	h, _ := encodeBinaryHeader(nil, &Command{Code: 105})
	h = h[:len(h)-4] // drop the empty ext length
	ext := make([]byte, 0, 7*1_000_000)
	for range 1_000_000 {
		ext = append(ext, 0, 1, 'k', 0, 0, 0, 0)
	}
	h = binary.BigEndian.AppendUint32(h, uint32(len(ext)))
	return append(h, ext...)
}

// A header with more fields than MaxExtFields is refused by both decoders, without the rest of
// it being decoded.
func TestHeaderFieldCountCapped(t *testing.T) {
	if _, err := decodeBinaryHeader(millionFieldsBinary()); !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("binary header of a million fields: %v, want ErrHeaderTooLarge", err)
	}
	var js strings.Builder
	js.WriteString(`{"code":105,"extFields":{`)
	for i := range MaxExtFields + 1 {
		if i > 0 {
			js.WriteByte(',')
		}
		js.WriteString(`"k` + strconv.Itoa(i) + `":"v"`)
	}
	js.WriteString(`}}`)
	if _, err := decodeJSONHeader([]byte(js.String())); !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("json header of %d fields: %v, want ErrHeaderTooLarge", MaxExtFields+1, err)
	}
	// At the cap both still decode.
	ext := map[string]string{}
	for i := range MaxExtFields {
		ext["k"+strconv.Itoa(i)] = "v"
	}
	for _, st := range []byte{SerializeJSON, SerializeRocketMQ} {
		f, err := Encode(&Command{Code: 105, ExtFields: ext, SerializeType: st})
		if err != nil {
			t.Fatal(err)
		}
		if c, err := Decode(f[4:]); err != nil || len(c.ExtFields) != MaxExtFields {
			t.Fatalf("serialize type %d at the cap: %v", st, err)
		}
	}
}

// A frame announcing a header over MaxHeaderSize is refused on its header word: the reader
// never waits for (or allocates) the rest.
func TestHeaderLengthRefusedOnHeaderWord(t *testing.T) {
	var pre [8]byte
	binary.BigEndian.PutUint32(pre[:], 8<<20)
	binary.BigEndian.PutUint32(pre[4:], uint32(SerializeRocketMQ)<<24|uint32(MaxHeaderSize+1))
	r := io.MultiReader(bytes.NewReader(pre[:]), blockingReader{})
	done := make(chan error, 1)
	go func() { _, err := ReadFrame(r, DefaultMaxFrameSize); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrHeaderTooLarge) {
			t.Fatalf("got %v, want ErrHeaderTooLarge", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reader waited for the body of a frame whose header is over the limit")
	}
	if _, err := Decode(append(pre[4:], make([]byte, MaxHeaderSize+1)...)); !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("Decode: %v, want ErrHeaderTooLarge", err)
	}
}

type blockingReader struct{}

func (blockingReader) Read([]byte) (int, error) { select {} }

// A frame announced at 16 MiB whose sender stops after a few bytes costs what arrived, not
// what was announced.
func TestFrameBufferGrowsAsBytesArrive(t *testing.T) {
	var pre [8]byte
	binary.BigEndian.PutUint32(pre[:], DefaultMaxFrameSize-4)
	binary.BigEndian.PutUint32(pre[4:], 0)
	const runs = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		_, err := ReadFrame(io.MultiReader(bytes.NewReader(pre[:]), bytes.NewReader(make([]byte, 100))), DefaultMaxFrameSize)
		if !errors.Is(err, ErrBadFrame) {
			t.Fatalf("truncated frame: %v, want ErrBadFrame", err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 256<<10 {
		t.Fatalf("a truncated 16 MiB frame allocated %d bytes, want < 256 KiB", per)
	}
	// A whole large frame still reads, byte for byte.
	body := bytes.Repeat([]byte("0123456789"), 300_000)
	f, err := Encode(&Command{Code: 10, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadFrame(iotestOneByteHalf{bytes.NewReader(f)}, DefaultMaxFrameSize)
	if err != nil || !bytes.Equal(got, f[4:]) {
		t.Fatalf("large frame read back wrong: %v", err)
	}
}

// iotestOneByteHalf returns short reads, as a slow network does.
type iotestOneByteHalf struct{ r io.Reader }

func (h iotestOneByteHalf) Read(p []byte) (int, error) {
	if len(p) > 1000 {
		p = p[:1000]
	}
	return h.r.Read(p)
}

// A peer that pipelines many requests and never reads its answers is not read beyond the
// pending bound: the server holds a bounded number of requests (and goroutines) for it, and
// every answer still arrives once the peer reads.
func TestPeerNotReadingAnswersIsNotReadFurther(t *testing.T) {
	const n = 20000
	s := startServer(t, func(s *Server) { s.Handle(10, echo) })
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	body := bytes.Repeat([]byte("x"), 512)
	var frames []byte
	for i := range n {
		req := NewRequest(10, nil, body)
		req.Opaque = int32(i)
		f, _ := Encode(req)
		frames = append(frames, f...)
	}
	baseline := runtime.NumGoroutine()
	go func() { _, _ = nc.Write(frames) }() // blocks once the server stops reading
	var sc *Conn
	deadline := time.Now().Add(10 * time.Second)
	for sc == nil || sc.flow.pending.Load() < DefaultMaxPendingRequests/2 {
		if time.Now().After(deadline) {
			t.Fatal("the server never had many pending requests")
		}
		time.Sleep(20 * time.Millisecond)
		if cs := s.Conns(); len(cs) == 1 {
			sc = cs[0]
		}
	}
	time.Sleep(500 * time.Millisecond) // let it read whatever it would
	if p := sc.flow.pending.Load(); p > DefaultMaxPendingRequests {
		t.Fatalf("%d pending requests, want at most %d", p, DefaultMaxPendingRequests)
	}
	if g := runtime.NumGoroutine() - baseline; g > DefaultMaxPendingRequests+50 {
		t.Fatalf("%d goroutines for one peer, want at most about %d", g, DefaultMaxPendingRequests)
	}
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(nc)
	for i := range n {
		if _, err := ReadFrame(r, DefaultMaxFrameSize); err != nil {
			t.Fatalf("answer %d of %d: %v", i+1, n, err)
		}
	}
}

// Connections beyond MaxConnections are closed at accept; the open ones keep working.
func TestMaxConnections(t *testing.T) {
	s := startServer(t, func(s *Server) {
		s.cfg.MaxConnections = 2
		s.Handle(10, echo)
	})
	var open []net.Conn
	for range 2 {
		nc, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		open = append(open, nc)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(s.Conns()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("connections not accepted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	extra, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); err == nil || errors.Is(err, errTimeout(err)) {
		t.Fatalf("third connection: %v, want it closed", err)
	}
	f, _ := Encode(NewRequest(10, nil, nil))
	if _, err := open[0].Write(f); err != nil {
		t.Fatal(err)
	}
	_ = open[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := ReadFrame(open[0], DefaultMaxFrameSize); err != nil {
		t.Fatalf("an accepted connection stopped working: %v", err)
	}
}

// errTimeout returns err itself when it is a timeout (so errors.Is matches), else a sentinel.
func errTimeout(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return errors.New("not a timeout")
}

// The read budget bounds bytes being read across connections: a frame that cannot get budget
// within the wait closes its connection instead of allocating.
func TestReadBudgetBoundsFrameBytes(t *testing.T) {
	b := newBudget(1<<20, 100*time.Millisecond)
	if err := b.acquire(1<<20, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.acquire(1, nil); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("over budget: %v, want ErrBudgetExhausted", err)
	}
	got := make(chan error, 1)
	go func() { got <- (newWaiter(b)) }()
	time.Sleep(20 * time.Millisecond)
	b.release(1 << 20)
	if err := <-got; err != nil {
		t.Fatalf("a waiter was not woken by a release: %v", err)
	}
}

func newWaiter(b *budget) error {
	b.wait = 5 * time.Second
	return b.acquire(512<<10, nil)
}

// On a server whose read budget is taken by a frame still arriving, another connection's frame
// waits for budget up to ReadBudgetWait and is then closed; once the budget is free again,
// frames are read as before.
func TestReadBudgetClosesWaitingConnection(t *testing.T) {
	const budget = 128 << 10
	s := startServer(t, func(s *Server) {
		s.cfg.MaxFrameSize = budget
		s.cfg.ReadBudget = budget
		s.cfg.ReadBudgetWait = 300 * time.Millisecond
		s.budget = newBudget(budget, s.cfg.ReadBudgetWait)
		s.Handle(10, echo)
	})
	big, _ := Encode(&Command{Code: 10, Body: make([]byte, budget-1024)})
	hog, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hog.Write(big[:len(big)-10]); err != nil { // all but the end: the budget stays taken
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	other, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Write(big); err != nil {
		t.Fatal(err)
	}
	_ = other.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := ReadFrame(other, DefaultMaxFrameSize); err == nil || errors.Is(err, errTimeout(err)) {
		t.Fatalf("a frame without budget: %v, want its connection closed", err)
	}
	_ = hog.Close() // frees the budget
	time.Sleep(100 * time.Millisecond)
	third, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if _, err := third.Write(big); err != nil {
		t.Fatal(err)
	}
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := ReadFrame(third, DefaultMaxFrameSize); err != nil {
		t.Fatalf("after the budget was freed: %v", err)
	}
}
