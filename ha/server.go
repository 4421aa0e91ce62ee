package ha

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/peerauth"
)

// Defaults of the HA keys (RocketMQ's MessageStoreConfig).
const (
	DefaultTransferBatchSize    = 32 << 10
	DefaultHeartbeatInterval    = 5 * time.Second
	DefaultHousekeepingInterval = 20 * time.Second
	DefaultMaxGapNotInSync      = 256 << 20
	// DefaultMaxConns bounds the slave connections one master accepts (each costs two
	// goroutines); a flood of connections beyond it is refused at accept.
	DefaultMaxConns = 64
)

// ErrNoSlave is returned by WaitAck when no slave is connected at all.
var ErrNoSlave = errors.New("ha: no slave connected")

// Source is what a master streams: its commitlog. In DLedger mode every call may reach a
// different store (a snapshot restore swaps it), so the calls are independent.
type Source interface {
	CommitLogMinOffset() (int64, error)
	CommitLogMaxOffset() (int64, error)
	// ReadCommitLog copies up to maxBytes from offset, never past the data's end or the end of
	// the file holding offset.
	ReadCommitLog(offset int64, maxBytes int) ([]byte, error)
}

// ServerConfig configures a master's HA server.
type ServerConfig struct {
	// Addr is the listen address, host:port (port 0: any).
	Addr   string
	Source Source
	Logger hclog.Logger
	// TransferBatchSize bounds a frame's body (haTransferBatchSize).
	TransferBatchSize int
	// HeartbeatInterval: an empty frame is sent after this long without data.
	HeartbeatInterval time.Duration
	// HousekeepingInterval: a slave silent this long is dropped.
	HousekeepingInterval time.Duration
	// MaxGapNotInSync: a slave further behind than this is not in sync (SlaveOK).
	MaxGapNotInSync int64
	MaxConns        int
	// Keys, when set, makes every slave prove its identity's key (package peerauth, purpose
	// "ha") before the server reads its first report: a connection that fails is closed with
	// nothing streamed and never counts for SlaveOK or WaitAck. nil: no authentication
	// (RocketMQ's behaviour).
	Keys peerauth.KeyFunc
}

func (c *ServerConfig) defaults() {
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.TransferBatchSize <= 0 {
		c.TransferBatchSize = DefaultTransferBatchSize
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.HousekeepingInterval <= 0 {
		c.HousekeepingInterval = DefaultHousekeepingInterval
	}
	if c.MaxGapNotInSync <= 0 {
		c.MaxGapNotInSync = DefaultMaxGapNotInSync
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
}

// Server is a master's HA server: it accepts slaves and streams the commitlog to each.
type Server struct {
	cfg ServerConfig
	ln  net.Listener
	log hclog.Logger

	mu    sync.Mutex
	conns map[*conn]struct{}
	// pending are the accepted connections still in the handshake (Close closes them too);
	// handshakes bounds them per remote host and in all, apart from MaxConns, so a flood of
	// peers that never authenticate cannot keep the real slaves out.
	pending    map[net.Conn]struct{}
	handshakes peerauth.Limiter
	// refusals rate-limits the log lines of failed handshakes.
	refusals refusalLog
	// ackCh is closed (and replaced) whenever a slave's acknowledged offset moves: WaitAck's
	// wake-up.
	ackCh  chan struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewServer returns a server; Start listens.
func NewServer(cfg ServerConfig) *Server {
	cfg.defaults()
	return &Server{cfg: cfg, log: cfg.Logger, conns: map[*conn]struct{}{}, pending: map[net.Conn]struct{}{}, ackCh: make(chan struct{})}
}

// Start listens on cfg.Addr and accepts slaves until Close.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on HA address %s: %w", s.cfg.Addr, err)
	}
	s.ln = ln
	s.wg.Add(1)
	go s.accept()
	s.log.Info("HA server listening", "addr", ln.Addr().String())
	return nil
}

// Addr is the address the server listens on (its real port).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops accepting, closes every slave connection and waits for their goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	for nc := range s.pending {
		_ = nc.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	for _, c := range conns {
		c.close("HA server stopping")
	}
	s.wg.Wait()
	s.ackChanged() // wake waiters: no slave any more
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("HA accept failed", "error", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		release := func() {}
		if s.cfg.Keys != nil {
			var ok bool
			if release, ok = s.handshakes.Acquire(nc.RemoteAddr()); !ok {
				s.refusals.warn(s.log, "HA connection refused: too many connections in the handshake", "slave", nc.RemoteAddr().String())
				_ = nc.Close()
				continue
			}
		}
		s.mu.Lock()
		if s.closed || len(s.conns) >= s.cfg.MaxConns {
			full := !s.closed
			s.mu.Unlock()
			release()
			if full {
				s.log.Warn("HA connection refused: too many slave connections", "slave", nc.RemoteAddr().String(), "max", s.cfg.MaxConns)
			}
			_ = nc.Close()
			continue
		}
		s.pending[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.admit(nc, release)
	}
}

// admit authenticates a new connection (with Keys) and then starts serving it.
func (s *Server) admit(nc net.Conn, release func()) {
	defer s.wg.Done()
	peer := ""
	if s.cfg.Keys != nil {
		id, err := peerauth.Server(nc, peerauth.PurposeHA, s.cfg.Keys, peerauth.DefaultTimeout)
		release()
		if err != nil {
			s.mu.Lock()
			delete(s.pending, nc)
			s.mu.Unlock()
			_ = nc.Close()
			if !peerauth.IsProbe(err) {
				s.refusals.warn(s.log, "HA connection refused: the peer did not authenticate; nothing streamed", "slave", nc.RemoteAddr().String(), "error", err)
			}
			return
		}
		peer = id
	}
	c := newConn(s, nc)
	s.mu.Lock()
	delete(s.pending, nc)
	if s.closed || len(s.conns) >= s.cfg.MaxConns {
		full := !s.closed
		s.mu.Unlock()
		if full {
			s.log.Warn("HA connection refused: too many slave connections", "slave", c.addr, "max", s.cfg.MaxConns)
		}
		_ = nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(2)
	s.mu.Unlock()
	if peer != "" {
		s.log.Info("HA slave connected", "slave", c.addr, "authenticatedAs", peer)
	} else {
		s.log.Info("HA slave connected", "slave", c.addr)
	}
	go c.readLoop()
	go c.transferLoop()
}

// refusalLog logs failed handshakes at most once a second, counting the rest.
type refusalLog struct {
	mu      sync.Mutex
	next    time.Time
	dropped int
}

func (r *refusalLog) warn(log hclog.Logger, msg string, args ...any) {
	r.mu.Lock()
	now := time.Now()
	if now.Before(r.next) {
		r.dropped++
		r.mu.Unlock()
		return
	}
	if r.dropped > 0 {
		args = append(args, "alikeSuppressed", r.dropped)
	}
	r.dropped, r.next = 0, now.Add(time.Second)
	r.mu.Unlock()
	log.Warn(msg, args...)
}

func (s *Server) remove(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.ackChanged()
}

// Notify tells every connection that the commitlog grew (call it after appends).
func (s *Server) Notify() {
	s.mu.Lock()
	for c := range s.conns {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
}

func (s *Server) ackChanged() {
	s.mu.Lock()
	close(s.ackCh)
	s.ackCh = make(chan struct{})
	s.mu.Unlock()
}

// maxAck is the largest offset any connected slave has acknowledged (-1: none) and the number
// of connections.
func (s *Server) maxAck() (int64, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	best := int64(-1)
	for c := range s.conns {
		best = max(best, c.ack.Load())
	}
	return best, len(s.conns)
}

// SlaveOK reports whether a SYNC_MASTER may wait for a slave: one is connected and has
// acknowledged an offset within MaxGapNotInSync of masterMax (RocketMQ's isSlaveOK).
func (s *Server) SlaveOK(masterMax int64) bool {
	ack, n := s.maxAck()
	return n > 0 && ack >= 0 && masterMax-ack < s.cfg.MaxGapNotInSync
}

// WaitAck waits until some slave has acknowledged offset (stored everything before it). It
// returns ctx's error on timeout and ErrNoSlave once no slave is connected.
func (s *Server) WaitAck(ctx context.Context, offset int64) error {
	for {
		s.mu.Lock()
		ch := s.ackCh
		s.mu.Unlock()
		ack, n := s.maxAck()
		if ack >= offset {
			return nil
		}
		if n == 0 {
			return ErrNoSlave
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ConnStatus is one slave connection as the master sees it.
type ConnStatus struct {
	Addr string
	// AckOffset is the slave's last reported max offset (-1 before its first report).
	AckOffset int64
	// TransferFrom is where streaming started (the slave's first report); Transferred is the
	// offset of the next byte to send.
	TransferFrom, Transferred int64
	ConnectedAt, LastReport   time.Time
	// BytesPerSecond is the average transfer rate over the connection's life.
	BytesPerSecond float64
}

// Status lists the connected slaves.
func (s *Server) Status() []ConnStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ConnStatus, 0, len(s.conns))
	now := time.Now()
	for c := range s.conns {
		st := ConnStatus{Addr: c.addr, AckOffset: c.ack.Load(), TransferFrom: c.from.Load(), Transferred: c.next.Load(),
			ConnectedAt: c.since, LastReport: time.UnixMilli(c.lastReport.Load())}
		if d := now.Sub(c.since).Seconds(); d > 0 {
			st.BytesPerSecond = float64(c.sent.Load()) / d
		}
		out = append(out, st)
	}
	return out
}

// InSync reports whether a slave acknowledged within MaxGapNotInSync of masterMax.
func (s *Server) InSync(st ConnStatus, masterMax int64) bool {
	return st.AckOffset >= 0 && masterMax-st.AckOffset < s.cfg.MaxGapNotInSync
}

// conn is one slave connection: readLoop takes its reports, transferLoop streams to it.
type conn struct {
	s     *Server
	nc    net.Conn
	addr  string
	since time.Time

	ack        atomic.Int64 // last reported offset, -1 before the first report
	from       atomic.Int64
	next       atomic.Int64
	lastReport atomic.Int64 // unix ms
	sent       atomic.Int64

	started   chan struct{} // closed at the first report
	wake      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, addr: nc.RemoteAddr().String(), since: time.Now(),
		started: make(chan struct{}), wake: make(chan struct{}, 1), done: make(chan struct{})}
	c.ack.Store(-1)
	c.from.Store(-1)
	c.next.Store(-1)
	return c
}

// close closes the connection once, logging why (at warning level for a peer that broke the
// protocol, at info level for an ordinary end).
func (c *conn) close(why string, args ...any) { c.closeLog(false, why, args...) }

// reject closes the connection of a peer that broke the protocol.
func (c *conn) reject(why string, args ...any) { c.closeLog(true, why, args...) }

func (c *conn) closeLog(warn bool, why string, args ...any) {
	c.closeOnce.Do(func() {
		close(c.done)
		_ = c.nc.Close()
		log := c.s.log.Info
		if warn {
			log = c.s.log.Warn
		}
		log("HA slave connection closed: "+why, append([]any{"slave", c.addr, "ackOffset", c.ack.Load()}, args...)...)
		c.s.remove(c)
	})
}

// readLoop reads the slave's 8-byte reports. The first one sets where streaming starts.
func (c *conn) readLoop() {
	defer c.s.wg.Done()
	var b [ReportSize]byte
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.HousekeepingInterval))
		if _, err := io.ReadFull(c.nc, b[:]); err != nil {
			select {
			case <-c.done:
			default:
				c.close("read report", "error", err)
			}
			return
		}
		off, err := ParseReport(b[:])
		if err != nil {
			c.reject("malformed report", "error", err)
			return
		}
		masterMax, err := c.s.cfg.Source.CommitLogMaxOffset()
		if err != nil {
			c.close("commitlog unavailable", "error", err)
			return
		}
		if off > masterMax {
			c.reject(fmt.Sprintf("the slave reports offset %d beyond this master's max offset %d (it holds data this master does not)", off, masterMax))
			return
		}
		first := c.ack.Load() < 0
		if first {
			minOff, err := c.s.cfg.Source.CommitLogMinOffset()
			if err != nil {
				c.close("commitlog unavailable", "error", err)
				return
			}
			if off < minOff {
				c.reject(fmt.Sprintf("the slave's offset %d is below this master's min offset %d (those files were deleted): copy the master's store to the slave", off, minOff))
				return
			}
			c.from.Store(off)
			c.next.Store(off)
		}
		c.ack.Store(off)
		c.lastReport.Store(time.Now().UnixMilli())
		if first {
			close(c.started)
			c.s.log.Info("HA slave reported its offset, transfer starts", "slave", c.addr, "offset", off, "masterMax", masterMax)
		}
		c.s.ackChanged()
	}
}

// transferLoop streams the commitlog from the slave's first report on.
func (c *conn) transferLoop() {
	defer c.s.wg.Done()
	select {
	case <-c.started:
	case <-c.done:
		return
	}
	cfg := &c.s.cfg
	buf := make([]byte, 0, HeaderSize+cfg.TransferBatchSize)
	lastWrite := time.Now()
	timer := time.NewTimer(cfg.HeartbeatInterval)
	defer timer.Stop()
	for {
		next := c.next.Load()
		masterMax, err := cfg.Source.CommitLogMaxOffset()
		if err != nil {
			c.close("commitlog unavailable", "error", err)
			return
		}
		if next < masterMax {
			data, err := cfg.Source.ReadCommitLog(next, cfg.TransferBatchSize)
			if err != nil {
				c.close("read commitlog", "offset", next, "error", err)
				return
			}
			if len(data) > 0 {
				buf = append(AppendHeader(buf[:0], Header{Offset: next, Size: int32(len(data))}), data...)
				if !c.write(buf) {
					return
				}
				c.next.Store(next + int64(len(data)))
				c.sent.Add(int64(len(data)))
				lastWrite = time.Now()
				continue
			}
		}
		if wait := cfg.HeartbeatInterval - time.Since(lastWrite); wait <= 0 {
			if !c.write(AppendHeader(buf[:0], Header{Offset: next})) {
				return
			}
			lastWrite = time.Now()
			continue
		} else {
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			// Notify covers appended records; the bound covers anything it misses.
			timer.Reset(min(wait, 100*time.Millisecond))
		}
		select {
		case <-c.done:
			return
		case <-c.wake:
		case <-timer.C:
		}
	}
}

func (c *conn) write(b []byte) bool {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.HousekeepingInterval))
	if _, err := c.nc.Write(b); err != nil {
		select {
		case <-c.done:
		default:
			c.close("write", "error", err)
		}
		return false
	}
	return true
}
