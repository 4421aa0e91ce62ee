package ha

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/peerauth"
)

// Defaults of the slave side.
const (
	// DefaultRetryInterval is how long a slave waits before reconnecting (RocketMQ waits 5 s;
	// shorter here so a legacy slave of a DLedger group finds a new leader within a second).
	DefaultRetryInterval = time.Second
	// DefaultMaxFrameBody bounds the body of a frame a slave accepts, whatever batch size the
	// master uses.
	DefaultMaxFrameBody = 16 << 20
	// DefaultMaxRecordSize bounds one record's claimed size on the slave.
	DefaultMaxRecordSize = 64 << 20
)

// ClientConfig configures a slave's HA client.
type ClientConfig struct {
	// MasterAddr returns the master's HA address to follow now ("" while unknown): the
	// configured haMasterAddress or the one the name server's registration answer gave.
	MasterAddr func() string
	Target     Target
	// FileSize is the local commitlog file size (mappedFileSizeCommitLog): the master's must be
	// the same.
	FileSize int64
	Logger   hclog.Logger
	// HeartbeatInterval: the slave reports at least this often.
	HeartbeatInterval time.Duration
	// HousekeepingInterval: a master silent this long is dropped.
	HousekeepingInterval time.Duration
	RetryInterval        time.Duration
	DialTimeout          time.Duration
	MaxFrameBody         int
	MaxRecordSize        int64
	// OnDisconnect is called after a connection ends, a dial fails, or while no master address
	// is known, once per retry (the broker re-registers with the name servers to learn the
	// current master's address).
	OnDisconnect func()
	// Credential, when set, is proved to the master (package peerauth, purpose "ha") right after
	// connecting, before the first report; the master proves the same key back.
	Credential *peerauth.Credential
}

// Client is a slave's HA client: it follows one master at a time, reconnecting as needed.
type Client struct {
	cfg  ClientConfig
	log  hclog.Logger
	stop chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex
	nc        net.Conn
	master    string
	connected bool

	masterSeen atomic.Int64 // highest master offset seen on the stream (frame end, heartbeat)
	lastRead   atomic.Int64 // unix ms
	lastWrite  atomic.Int64 // unix ms
	received   atomic.Int64
	startedAt  time.Time
	closeOnce  sync.Once
}

// NewClient returns a client; Start runs it.
func NewClient(cfg ClientConfig) *Client {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.HousekeepingInterval <= 0 {
		cfg.HousekeepingInterval = DefaultHousekeepingInterval
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = DefaultRetryInterval
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 3 * time.Second
	}
	if cfg.MaxFrameBody <= 0 {
		cfg.MaxFrameBody = DefaultMaxFrameBody
	}
	if cfg.MaxRecordSize <= 0 {
		cfg.MaxRecordSize = DefaultMaxRecordSize
	}
	c := &Client{cfg: cfg, log: cfg.Logger, stop: make(chan struct{}), startedAt: time.Now()}
	c.masterSeen.Store(-1)
	return c
}

// Start runs the connect-follow-reconnect loop until Close.
func (c *Client) Start() {
	c.wg.Add(1)
	go c.run()
}

// Close stops following and waits for the loop to end.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		close(c.stop)
		c.mu.Lock()
		if c.nc != nil {
			_ = c.nc.Close()
		}
		c.mu.Unlock()
		c.wg.Wait()
	})
}

// ClientStatus is the slave side of HA for status reports.
type ClientStatus struct {
	MasterAddr string
	Connected  bool
	// MaxOffset is the local commitlog end; MasterOffset the highest master offset seen on the
	// stream (-1: none yet), so MasterOffset-MaxOffset is how far behind the slave is known to be.
	MaxOffset, MasterOffset int64
	LastRead, LastWrite     time.Time
	BytesPerSecond          float64
}

// Status reports the client's state.
func (c *Client) Status() ClientStatus {
	c.mu.Lock()
	st := ClientStatus{MasterAddr: c.master, Connected: c.connected}
	c.mu.Unlock()
	st.MaxOffset = c.cfg.Target.CommitLogMaxOffset()
	st.MasterOffset = c.masterSeen.Load()
	st.LastRead = time.UnixMilli(c.lastRead.Load())
	st.LastWrite = time.UnixMilli(c.lastWrite.Load())
	if d := time.Since(c.startedAt).Seconds(); d > 0 {
		st.BytesPerSecond = float64(c.received.Load()) / d
	}
	return st
}

func (c *Client) run() {
	defer c.wg.Done()
	// After a connection that was up ends (its master died or lost leadership), retry soon and
	// back off to RetryInterval: a DLedger group elects and registers a new leader in a few
	// hundred milliseconds.
	wait := c.cfg.RetryInterval
	for {
		if addr := c.cfg.MasterAddr(); addr != "" {
			if c.follow(addr) {
				wait = min(100*time.Millisecond, c.cfg.RetryInterval)
			}
		}
		if c.cfg.OnDisconnect != nil {
			c.cfg.OnDisconnect()
		}
		select {
		case <-c.stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, c.cfg.RetryInterval)
	}
}

// follow runs one connection to addr until it fails or the client stops. It reports whether
// the connection was established.
func (c *Client) follow(addr string) bool {
	nc, err := net.DialTimeout("tcp", addr, c.cfg.DialTimeout)
	if err != nil {
		c.log.Debug("HA connect to master failed", "master", addr, "error", err)
		return false
	}
	if cred := c.cfg.Credential; cred != nil {
		if err := peerauth.Client(nc, peerauth.PurposeHA, *cred, peerauth.DefaultTimeout); err != nil {
			_ = nc.Close()
			c.log.Warn("HA master refused or failed the peer authentication", "master", addr, "identity", cred.Identity, "error", err)
			return false
		}
	}
	c.mu.Lock()
	select {
	case <-c.stop:
		c.mu.Unlock()
		_ = nc.Close()
		return false
	default:
	}
	c.nc, c.master, c.connected = nc, addr, true
	c.mu.Unlock()
	defer func() {
		_ = nc.Close()
		c.mu.Lock()
		c.nc, c.connected = nil, false
		c.mu.Unlock()
	}()

	ap := newApplier(c.cfg.Target, c.cfg.FileSize, c.cfg.MaxRecordSize)
	c.log.Info("HA connected to master", "master", addr, "offset", ap.next)
	var wmu sync.Mutex
	report := func() error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = nc.SetWriteDeadline(time.Now().Add(c.cfg.HousekeepingInterval))
		_, err := nc.Write(AppendReport(nil, c.cfg.Target.CommitLogMaxOffset()))
		if err == nil {
			c.lastWrite.Store(time.Now().UnixMilli())
		}
		return err
	}
	if err := report(); err != nil {
		c.log.Warn("HA first report to master failed", "master", addr, "error", err)
		return true
	}
	hbDone := make(chan struct{})
	defer close(hbDone)
	go func() {
		t := time.NewTicker(c.cfg.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-hbDone:
				return
			case <-t.C:
				if report() != nil {
					_ = nc.Close() // the read loop sees it
					return
				}
			}
		}
	}()
	var buf []byte
	for {
		_ = nc.SetReadDeadline(time.Now().Add(c.cfg.HousekeepingInterval))
		h, body, err := ReadFrame(nc, buf, c.cfg.MaxFrameBody)
		if err != nil {
			c.logEnd(addr, ap, err)
			return true
		}
		if cap(body) > cap(buf) {
			buf = body[:0]
		}
		c.lastRead.Store(time.Now().UnixMilli())
		if end := h.Offset + int64(h.Size); end > c.masterSeen.Load() {
			c.masterSeen.Store(end)
		}
		n, err := ap.feed(h.Offset, body)
		c.received.Add(int64(len(body)))
		if n > 0 {
			if rerr := report(); rerr != nil && err == nil {
				err = rerr
			}
		}
		if err != nil {
			c.logEnd(addr, ap, err)
			return true
		}
	}
}

func (c *Client) logEnd(addr string, ap *applier, err error) {
	select {
	case <-c.stop:
		return
	default:
	}
	args := []any{"master", addr, "slaveOffset", c.cfg.Target.CommitLogMaxOffset(), "expected", ap.next, "pending", ap.pending(), "error", err}
	switch {
	case errors.Is(err, ErrOffsetMismatch):
		c.log.Warn("HA offset mismatch: closing the connection to the master (reconnecting reports this slave's offset again)", args...)
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrCorrupt):
		c.log.Error("HA master sent bytes this slave cannot store: closing the connection", args...)
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded):
		c.log.Info("HA connection to master ended", args...)
	default:
		c.log.Warn("HA connection to master failed", args...)
	}
}
