package remoting

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// ErrConnClosed is returned for requests whose connection closed before an
// answer arrived, and for writes to a closed connection.
var ErrConnClosed = errors.New("remoting: connection closed")

// ErrNotSent is wrapped (besides the cause) by Invoke's errors for a request that never left
// this process: the connection was closed before the request was queued for writing, the
// request could not be encoded, or (Client) the connection could not be dialled. The peer cannot
// have acted on it, so a caller may send it elsewhere without risking a duplicate. Any other
// error after the request was queued leaves its outcome unknown.
var ErrNotSent = errors.New("remoting: request not sent")

// Handler serves one request code. It returns the response, or nil when it
// will answer later through Conn.Reply (long polling) or not at all. The
// returned command's opaque, flag and serialize type are filled in by the
// connection, so handlers only set code, remark, ext fields and body.
type Handler func(conn *Conn, req *Command) *Command

// nextOpaque numbers requests this process originates; the same counter
// serves every connection, as in the Go client.
var nextOpaque atomic.Int32

var nextConnID atomic.Uint64

// handlerTable maps request codes to handlers; it is filled before a server
// starts and read-only afterwards.
type handlerTable map[int32]Handler

// orderedCodes are the request codes a connection serves one at a time in arrival order (see
// Server.HandleInOrder); filled before a server starts and read-only afterwards.
type orderedCodes map[int32]bool

// inlineCodes are the request codes a connection may serve on its read goroutine, with the
// predicate that decides it per request (see Server.HandleInline); read-only once serving.
type inlineCodes map[int32]func(*Command) bool

// Conn is one TCP connection in either direction. Requests arriving on it are
// served concurrently (responses may leave out of order, matched by opaque),
// except those of ordered codes, which are served one after another in arrival order, and
// those its server lets it serve inline, on the goroutine that reads it; requests sent on it
// are matched to their responses. The broker uses the
// same connection to call back clients (NOTIFY_CONSUMER_IDS_CHANGED, ...).
type Conn struct {
	nc       net.Conn
	remote   netip.AddrPort
	id       uint64
	logger   hclog.Logger
	handlers handlerTable
	maxFrame int
	idle     time.Duration
	// onRequest is ServerConfig.OnRequest (nil on client connections).
	onRequest func(code, respCode int32, elapsed time.Duration)
	// intercept (server side) checks requests before their handler; beforeRequest (client
	// side) adjusts outgoing requests. Both are set right after newConn, before serve.
	intercept     Handler
	beforeRequest func(*Command)
	// binaryRequests sends this connection's requests with the binary header
	// (ClientConfig.BinaryHeaders).
	binaryRequests bool
	// keep is which commands read here keep their extFields flat (flatext.go).
	keep flatRule

	out       chan outFrame
	limits    limits
	flow      flow
	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error

	mu        sync.Mutex
	pending   map[int32]pendingCall
	sweepOnce sync.Once // starts sweepAsync on the first InvokeAsync

	// ordered codes are queued on lane and served by at most one worker at a time.
	ordered  orderedCodes
	inline   inlineCodes
	laneMu   sync.Mutex
	lane     []*Command
	laneBusy bool

	// Attachment lets the broker hang per-connection state (client id, groups)
	// on the connection without a second lookup table.
	Attachment atomic.Value
}

func newConn(nc net.Conn, handlers handlerTable, logger hclog.Logger, maxFrame int, idle time.Duration) *Conn {
	var remote netip.AddrPort
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		remote = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return &Conn{
		nc:       nc,
		remote:   remote,
		id:       nextConnID.Add(1),
		logger:   logger,
		handlers: handlers,
		maxFrame: maxFrame,
		idle:     idle,
		out:      make(chan outFrame, 1024),
		closed:   make(chan struct{}),
		pending:  map[int32]pendingCall{},
		flow:     flow{wake: make(chan struct{}, 1)},
	}
}

// outFrame is a frame queued for writing; answer marks the response to a request of the peer
// whose pending slot (of size bytes) is freed once it is written.
type outFrame struct {
	b      []byte // the frame, or its head (encodeHead) when body follows
	body   []byte // written after b: the command's body, not copied into a frame first
	size   int
	answer bool
}

// bytes is what the frame puts on the wire.
func (f outFrame) bytes() int { return len(f.b) + len(f.body) }

// ID is a process-unique number for the connection, for maps and logs.
func (c *Conn) ID() uint64 { return c.id }

// RemoteAddr is the peer's "ip:port".
func (c *Conn) RemoteAddr() string { return c.nc.RemoteAddr().String() }

// RemoteAddrPort is the peer's address, parsed once per connection: the broker stores it as the
// born host of every message sent on the connection. IPv4-mapped addresses are unmapped; a
// connection that is not TCP gives the zero value.
func (c *Conn) RemoteAddrPort() netip.AddrPort { return c.remote }

// LocalAddr is this side's "ip:port".
func (c *Conn) LocalAddr() string { return c.nc.LocalAddr().String() }

// Done is closed when the connection is closed.
func (c *Conn) Done() <-chan struct{} { return c.closed }

// Close closes the connection and fails every request waiting on it.
func (c *Conn) Close() error {
	c.closeWith(nil)
	return nil
}

func (c *Conn) closeWith(err error) {
	c.closeOnce.Do(func() {
		c.closeErr = err
		close(c.closed)
		_ = c.nc.Close()
		var async []pendingCall
		c.mu.Lock()
		for op, pc := range c.pending {
			delete(c.pending, op)
			if pc.done != nil {
				async = append(async, pc)
			} else {
				close(pc.ch)
			}
		}
		c.mu.Unlock()
		for _, pc := range async {
			c.complete(pc, nil, fmt.Errorf("request code %d to %s: %w", pc.code, c.RemoteAddr(), ErrConnClosed))
		}
	})
}

// pendingCall is a request waiting for its response: a goroutine in Invoke (ch) or a callback
// registered by InvokeAsync (done, with its deadline).
type pendingCall struct {
	ch       chan *Command
	done     func(*Command, error)
	code     int32
	deadline time.Time
}

// asyncSweep is how often a connection with InvokeAsync calls pending looks for expired ones:
// a callback's timeout comes up to this late.
const asyncSweep = 50 * time.Millisecond

// InvokeAsync sends req and returns at once; done is called exactly once, with the response,
// or with an error when the connection closes or when deadline has passed first (noticed within
// asyncSweep). done runs on the connection's read goroutine (or on the one closing the
// connection or sweeping expired calls), so it must not block; it may send further requests.
// A panic in done is logged and does not stop the connection. An error returned here (the
// request could not be queued) means done will not be called.
func (c *Conn) InvokeAsync(req *Command, deadline time.Time, done func(*Command, error)) error {
	req.Opaque = nextOpaque.Add(1)
	req.Flag &^= FlagResponse
	c.prepare(req)
	c.sweepOnce.Do(func() { go c.sweepAsync() })
	c.mu.Lock()
	select {
	case <-c.closed:
		c.mu.Unlock()
		return ErrConnClosed
	default:
	}
	c.pending[req.Opaque] = pendingCall{done: done, code: req.Code, deadline: deadline}
	c.mu.Unlock()
	err := c.send(req)
	if err != nil {
		c.mu.Lock()
		_, mine := c.pending[req.Opaque]
		delete(c.pending, req.Opaque)
		c.mu.Unlock()
		if !mine {
			return nil // the closer took it and has called (or is calling) done
		}
		return fmt.Errorf("send request code %d to %s: %w", req.Code, c.RemoteAddr(), err)
	}
	return nil
}

// sweepAsync fails InvokeAsync calls whose deadline has passed, until the connection closes.
func (c *Conn) sweepAsync() {
	t := time.NewTicker(asyncSweep)
	defer t.Stop()
	var expired []pendingCall
	for {
		select {
		case <-c.closed:
			return
		case now := <-t.C:
			expired = expired[:0]
			c.mu.Lock()
			for op, pc := range c.pending {
				if pc.done != nil && now.After(pc.deadline) {
					delete(c.pending, op)
					expired = append(expired, pc)
				}
			}
			c.mu.Unlock()
			for _, pc := range expired {
				c.complete(pc, nil, fmt.Errorf("request code %d to %s: %w", pc.code, c.RemoteAddr(), context.DeadlineExceeded))
			}
		}
	}
}

// complete hands an InvokeAsync call its outcome, containing a panic in the callback.
func (c *Conn) complete(pc pendingCall, resp *Command, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.logger.Error("InvokeAsync callback panicked", "remote", c.RemoteAddr(), "code", pc.code, "panic", r)
		}
	}()
	pc.done(resp, err)
}

// Reply sends a response (or any pre-built command) on the connection.
func (c *Conn) Reply(resp *Command) error {
	if err := c.send(resp); err != nil {
		return fmt.Errorf("send response to %s: %w", c.RemoteAddr(), err)
	}
	return nil
}

// prepare readies a request for encoding: the client's BeforeRequest hook (a signature), then
// the binary header when the client asks for it and the code fits that header's 16 bits.
func (c *Conn) prepare(req *Command) {
	if c.beforeRequest != nil {
		c.beforeRequest(req)
	}
	if c.binaryRequests && req.Code >= -1<<15 && req.Code <= 1<<15-1 {
		req.SerializeType = SerializeRocketMQ
	}
}

// send encodes cmd's head and queues it with cmd's body, which must not change until the
// frame is written (Body's contract).
func (c *Conn) send(cmd *Command) error {
	head, err := encodeHead(cmd)
	if err != nil {
		return err
	}
	return c.queue(outFrame{b: head, body: cmd.Body})
}

// queue waits for room in the write queue, counting the frame's bytes as queued.
func (c *Conn) queue(f outFrame) error {
	select {
	case <-c.closed:
		return ErrConnClosed
	default:
	}
	c.flow.queuedBytes.Add(int64(f.bytes()))
	select {
	case c.out <- f:
		return nil
	case <-c.closed:
		return ErrConnClosed
	}
}

// written accounts for a frame the write loop has handed to the socket.
func (c *Conn) written(f outFrame) {
	c.flow.queuedBytes.Add(-int64(f.bytes()))
	if f.answer {
		c.finish(f.size)
	} else if c.limits.maxQueuedBytes > 0 {
		c.signal()
	}
}

// Invoke sends a request and waits for its response or ctx's end.
func (c *Conn) Invoke(ctx context.Context, req *Command) (*Command, error) {
	req.Opaque = nextOpaque.Add(1)
	req.Flag &^= FlagResponse
	c.prepare(req)
	ch := make(chan *Command, 1)
	c.mu.Lock()
	select {
	case <-c.closed:
		c.mu.Unlock()
		return nil, fmt.Errorf("send request code %d to %s: %w: %w", req.Code, c.RemoteAddr(), ErrNotSent, ErrConnClosed)
	default:
	}
	c.pending[req.Opaque] = pendingCall{ch: ch, code: req.Code}
	c.mu.Unlock()
	if err := c.send(req); err != nil { // fails only before the frame is queued
		c.forget(req.Opaque)
		return nil, fmt.Errorf("send request code %d to %s: %w: %w", req.Code, c.RemoteAddr(), ErrNotSent, err)
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("request code %d to %s: %w", req.Code, c.RemoteAddr(), ErrConnClosed)
		}
		return resp, nil
	case <-ctx.Done():
		c.forget(req.Opaque)
		return nil, fmt.Errorf("request code %d to %s: %w", req.Code, c.RemoteAddr(), ctx.Err())
	}
}

// InvokeOneway sends a request with the oneway bit and does not wait.
func (c *Conn) InvokeOneway(req *Command) error {
	req.Opaque = nextOpaque.Add(1)
	req.Flag = (req.Flag | FlagOneway) &^ FlagResponse
	c.prepare(req)
	if err := c.send(req); err != nil {
		return fmt.Errorf("send oneway request code %d: %w", req.Code, err)
	}
	return nil
}

func (c *Conn) forget(opaque int32) {
	c.mu.Lock()
	delete(c.pending, opaque)
	c.mu.Unlock()
}

// serve runs the connection until it closes: a writer goroutine coalesces
// queued frames into as few syscalls as possible, and the reader dispatches.
func (c *Conn) serve() {
	go c.writeLoop()
	c.readLoop()
}

func (c *Conn) writeLoop() {
	w := bufio.NewWriterSize(c.nc, 64*1024)
	for {
		select {
		case frame := <-c.out:
			if c.limits.writeTimeout > 0 {
				// A peer that reads nothing for this long is gone or hostile: close it rather
				// than hold its answers (and, through back-pressure, its connection) forever.
				_ = c.nc.SetWriteDeadline(time.Now().Add(c.limits.writeTimeout))
			}
			if err := writeFrame(w, frame); err != nil {
				c.closeWith(err)
				return
			}
			c.written(frame)
			// Drain whatever else is queued before paying for a flush. When the
			// queue looks empty, yield once: handlers finishing on other
			// goroutines usually have responses moments away, and one write
			// syscall for several responses is much cheaper than one each.
			for yielded := false; ; {
				select {
				case f := <-c.out:
					if err := writeFrame(w, f); err != nil {
						c.closeWith(err)
						return
					}
					c.written(f)
					continue
				default:
				}
				if yielded {
					break
				}
				yielded = true
				runtime.Gosched()
			}
			if err := w.Flush(); err != nil {
				c.closeWith(err)
				return
			}
		case <-c.closed:
			return
		}
	}
}

// writeFrame puts a queued frame into the connection's write buffer: its head, then its body
// (a body larger than the buffer's free space goes to the socket from where it is).
func writeFrame(w *bufio.Writer, f outFrame) error {
	if _, err := w.Write(f.b); err != nil {
		return err
	}
	if len(f.body) > 0 {
		if _, err := w.Write(f.body); err != nil {
			return err
		}
	}
	return nil
}

func (c *Conn) readLoop() {
	defer c.closeWith(nil)
	r := bufio.NewReaderSize(c.nc, 64*1024)
	var res *frameReserve
	if c.limits.budget != nil {
		res = &frameReserve{c: c}
	}
	var arrivals uint64 // requests read so far (Command.Arrival)
	var pre [8]byte     // readFrame's scratch: one per connection rather than one per frame
	var now time.Time   // when the last read from the connection returned
	// The idle deadline is moved only when a sixteenth of c.idle has passed since it was last
	// set, and then to that much more than c.idle ahead: a connection still closes after c.idle
	// to c.idle*17/16 without a frame, and a busy one does not reset its deadline timer (and read
	// the clock for it) per frame.
	var deadlineSet time.Time
	if c.idle > 0 {
		deadlineSet = time.Now()
		_ = c.nc.SetReadDeadline(deadlineSet.Add(c.idle + c.idle/16))
	}
	for {
		if c.full() {
			if !c.waitRoom() {
				return
			}
			// The requests still buffered count as read now, not before the pause.
			now = time.Time{}
			if c.idle > 0 { // the pause was this server's doing: the idle countdown starts again
				deadlineSet = time.Now()
				_ = c.nc.SetReadDeadline(deadlineSet.Add(c.idle + c.idle/16))
			}
		}
		var frame []byte
		var err error
		buffered := r.Buffered()
		if res != nil {
			res.charged = 0
			frame, err = readFrame(r, c.maxFrame, res.reserve, &pre)
		} else {
			frame, err = readFrame(r, c.maxFrame, nil, &pre)
		}
		if err != nil {
			if res != nil {
				c.limits.budget.release(int64(res.charged))
			}
			c.logReadError(err)
			return
		}
		// A frame that was whole in the buffer arrived with the read that filled it: it takes
		// that read's time, so a read holding many pipelined requests reads the clock once.
		if buffered < 4+len(frame) || now.IsZero() {
			now = time.Now()
		}
		if c.idle > 0 && now.Sub(deadlineSet) >= c.idle/16 {
			deadlineSet = now
			_ = c.nc.SetReadDeadline(now.Add(c.idle + c.idle/16))
		}
		cmd, err := decodeKeeping(frame, c.keep)
		if err != nil {
			if res != nil {
				c.limits.budget.release(int64(res.charged))
			}
			c.logger.Warn("closing connection: undecodable frame", "remote", c.RemoteAddr(), "error", err)
			return
		}
		cmd.received = now
		if res != nil {
			cmd.held = res.charged
		}
		if cmd.IsResponse() {
			c.releaseBudget(cmd)
			c.mu.Lock()
			pc, ok := c.pending[cmd.Opaque]
			delete(c.pending, cmd.Opaque)
			c.mu.Unlock()
			switch {
			case ok && pc.done != nil:
				c.complete(pc, cmd, nil)
			case ok:
				pc.ch <- cmd
			default:
				c.logger.Debug("dropping response with no waiting request", "remote", c.RemoteAddr(), "opaque", cmd.Opaque)
			}
			continue
		}
		cmd.size = len(frame)
		arrivals++
		cmd.arrival = arrivals
		c.begin(cmd)
		if c.ordered[cmd.Code] {
			c.enqueueOrdered(cmd)
			continue
		}
		if inline := c.inline[cmd.Code]; inline != nil && inline(cmd) {
			c.dispatch(cmd)
			continue
		}
		runTask(task{c: c, req: cmd})
	}
}

// enqueueOrdered queues req behind the connection's other ordered requests, starting a worker
// to drain the lane if none is draining it.
func (c *Conn) enqueueOrdered(req *Command) {
	c.laneMu.Lock()
	c.lane = append(c.lane, req)
	start := !c.laneBusy
	c.laneBusy = true
	c.laneMu.Unlock()
	if start {
		runTask(task{c: c, lane: true})
	}
}

// drainLane serves the ordered requests one by one until the lane is empty.
func (c *Conn) drainLane() {
	for {
		c.laneMu.Lock()
		if len(c.lane) == 0 {
			c.lane, c.laneBusy = nil, false
			c.laneMu.Unlock()
			return
		}
		req := c.lane[0]
		c.lane[0] = nil
		c.lane = c.lane[1:]
		c.laneMu.Unlock()
		c.dispatch(req)
	}
}

// task is one request to serve, or (lane) the connection's ordered requests.
type task struct {
	c    *Conn
	req  *Command
	lane bool
}

func (t task) run() {
	if t.lane {
		t.c.drainLane()
		return
	}
	t.c.dispatch(t.req)
}

// idleTasks hands requests to workers that are waiting for one. Reusing
// goroutines keeps their grown stacks: a fresh goroutine per request spent
// ~8% of the broker's CPU growing and copying stacks on the send path.
var idleTasks = make(chan task)

// workerIdle is how long a worker waits for another request before exiting.
const workerIdle = 10 * time.Second

// runTask serves t on an idle worker, or on a new one when all are busy, so a
// request that blocks (a long poll, a sync flush) never delays another.
func runTask(t task) {
	select {
	case idleTasks <- t:
	default:
		go worker(t)
	}
}

func worker(t task) {
	t.run()
	timer := time.NewTimer(workerIdle)
	defer timer.Stop()
	for {
		select {
		case t = <-idleTasks:
			t.run()
			timer.Reset(workerIdle)
		case <-timer.C:
			return
		}
	}
}

func (c *Conn) logReadError(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrBadFrame), errors.Is(err, ErrHeaderTooLarge):
		c.logger.Warn("closing connection: bad frame", "remote", c.RemoteAddr(), "error", err)
	case errors.Is(err, ErrBudgetExhausted):
		c.logger.Warn("closing connection: the server is reading too many bytes at once", "remote", c.RemoteAddr(), "error", err)
	case errors.As(err, &ne) && ne.Timeout():
		c.logger.Info("closing idle connection", "remote", c.RemoteAddr(), "idle", c.idle)
	default:
		select {
		case <-c.closed:
		default:
			c.logger.Debug("connection closed", "remote", c.RemoteAddr(), "error", err)
		}
	}
}

func (c *Conn) dispatch(req *Command) {
	var start time.Time
	if c.onRequest != nil {
		start = req.ReceivedOrNow()
	}
	resp := c.handle(req)
	c.releaseBudget(req)
	if resp == nil {
		if !req.deferred {
			c.finish(req.size)
		}
		return
	}
	c.answer(req, resp, start, true)
}

// answer completes resp as req's response and queues it; start is when req was read
// (zero when there is no OnRequest hook). With wait, it waits for room in the connection's
// queue (back-pressure on the goroutine serving that connection's requests); without, it never
// blocks.
func (c *Conn) answer(req, resp *Command, start time.Time, wait bool) {
	if req.IsOneway() {
		c.finish(req.size)
		return
	}
	if c.onRequest != nil {
		c.onRequest(req.Code, resp.Code, time.Since(start))
	}
	resp.Opaque = req.Opaque
	resp.Flag |= FlagResponse
	resp.SerializeType = req.SerializeType
	if resp.SerializeType == SerializeRocketMQ && (resp.Code < -1<<15 || resp.Code > 1<<15-1) {
		resp.SerializeType = SerializeJSON
	}
	head, err := encodeHead(resp)
	if err != nil {
		c.logger.Warn("cannot answer request", "remote", c.RemoteAddr(), "code", req.Code, "error", err)
		c.finish(req.size)
		return
	}
	f := outFrame{b: head, body: resp.Body, size: req.size, answer: true}
	if wait {
		_ = c.queue(f) // fails only once the connection is closed
		return
	}
	c.flow.queuedBytes.Add(int64(f.bytes()))
	select {
	case c.out <- f:
	case <-c.closed:
	default:
		// The peer is not reading its answers (its queue is full). Whoever answers a deferred
		// request also answers other connections' (a Raft entry's sends): park a goroutine for
		// this answer instead of holding them all up. The connection's pending bound (flow.go)
		// caps how many such goroutines it can have.
		go func() {
			select {
			case c.out <- f:
			case <-c.closed:
			}
		}()
	}
}

// Deferred is a request whose handler returned nil and answers later from another goroutine:
// a send completed by the Raft batcher answers every send of an entry from the goroutine that
// saw the entry commit, instead of waking one parked handler goroutine per send.
type Deferred struct {
	c     *Conn
	req   *Command
	start time.Time
}

// Defer lets a handler answer req later: it returns nil and calls Answer once, from any
// goroutine. Unlike Reply, Answer fills in the response's opaque, flag and serialize type and
// reports the request to ServerConfig.OnRequest with the time until the answer.
func (c *Conn) Defer(req *Command) *Deferred {
	d := &Deferred{}
	c.DeferAt(d, req)
	return d
}

// DeferAt is Defer with the caller's Deferred: a request's in-flight state that holds it spares
// an allocation per request.
func (c *Conn) DeferAt(d *Deferred, req *Command) {
	req.deferred = true
	*d = Deferred{c: c, req: req}
	if c.onRequest != nil {
		d.start = req.ReceivedOrNow()
	}
}

// Answer sends what f returns as the deferred request's response (nothing for a oneway request
// or a nil result). A panic in f is answered SYSTEM_ERROR and logged, as a handler's is.
func (d *Deferred) Answer(f func() *Command) {
	d.send(d.c.safely(d.req, f))
}

// Responder builds a deferred request's response: a request's in-flight state that answers
// itself (Deferred.AnswerWith) needs no closure per answer.
type Responder interface {
	Respond() *Command
}

// AnswerWith is Answer with r.Respond building the response.
func (d *Deferred) AnswerWith(r Responder) {
	d.send(d.c.safelyRespond(d.req, r))
}

func (d *Deferred) send(resp *Command) {
	if resp != nil {
		d.c.answer(d.req, resp, d.start, false)
	} else {
		d.c.finish(d.req.size)
	}
}

func (c *Conn) handle(req *Command) *Command {
	return c.safely(req, func() *Command {
		if c.intercept != nil {
			if refused := c.intercept(c, req); refused != nil {
				return refused
			}
		}
		h, ok := c.handlers[req.Code]
		if !ok {
			return req.NewResponse(RequestCodeNotSupported, fmt.Sprintf(" request type %d not supported", req.Code))
		}
		return h(c, req)
	})
}

// safely runs f, which serves req, turning a panic into a SYSTEM_ERROR answer and a log line so
// one bad request cannot take the server down.
func (c *Conn) safely(req *Command, f func() *Command) (resp *Command) {
	defer c.recoverAnswer(req, &resp)
	return f()
}

// safelyRespond is safely with a Responder.
func (c *Conn) safelyRespond(req *Command, r Responder) (resp *Command) {
	defer c.recoverAnswer(req, &resp)
	return r.Respond()
}

// recoverAnswer, deferred, turns a panic serving req into its SYSTEM_ERROR answer in *resp.
func (c *Conn) recoverAnswer(req *Command, resp **Command) {
	if r := recover(); r != nil {
		c.logger.Error("handler panicked", "code", req.Code, "remote", c.RemoteAddr(), "panic", r)
		*resp = req.NewResponse(SystemError, fmt.Sprintf("internal error serving request code %d: %v", req.Code, r))
	}
}
