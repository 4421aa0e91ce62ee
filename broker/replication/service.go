package replication

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/ha"
	"rocketraft/peerauth"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// SyncInterval is how often a slave copies the master's metadata (RocketMQ's SlaveSynchronize
// period); a new master address triggers a copy at once.
const SyncInterval = 10 * time.Second

// Role is the broker's place as replication sees it, decided once by the broker.
type Role int

const (
	// Master is a classic ASYNC_MASTER: it serves slaves for its whole life.
	Master Role = iota
	// SyncMaster is a classic SYNC_MASTER: a Master whose sends wait for a slave (WaitReplicas).
	SyncMaster
	// Slave is a classic SLAVE: it follows a master.
	Slave
	// GroupMember is a DLedger node: it serves legacy slaves while it is the ready leader.
	GroupMember
)

// Config is what a Service needs from the broker.
type Config struct {
	Role Role
	// Broker holds the HA keys (haListenPort, brokerIP2, haMasterAddress, the transfer and
	// heartbeat settings, mappedFileSizeCommitLog, maxMessageSize, syncFlushTimeout, brokerId,
	// brokerName, namesrvAddr).
	Broker *config.Broker
	// ListenAddr is the HA server's listen address (host:port; the host empty for every
	// interface).
	ListenAddr string
	// Acquire returns the store the HA server streams and its release function; in classic mode
	// the local store, which a slave appends to and a SYNC_MASTER reads the end of. It is first
	// called by Start, so the service may be built before the store opens (the store's dispatch
	// callback calls Notify from its first append).
	Acquire func() (*storage.Store, func(), error)
	// Keys is what the HA server requires of a slave, Credential what a slave proves (nil:
	// nothing; the broker's peer-link policy decides).
	Keys       peerauth.KeyFunc
	Credential *peerauth.Credential
	// ClientTLS is the TLS of the slave's remoting connection to the master (nil: plain).
	ClientTLS *tls.Config
	// A slave's copy of the master's metadata.
	Topics       *meta.Topics
	Groups       *meta.Groups
	Offsets      *meta.Offsets
	DelayOffsets *meta.DelayOffsets
	// TriggerRegister asks for a registration with the name servers now (a slave re-learns its
	// master's address; a changed topic table is announced).
	TriggerRegister func()
	// RouteBrokerAddrs is the group's brokerId -> address map as name server ns has it; SelfAddr
	// this broker's remoting address (a slave checks its brokerId is its own).
	RouteBrokerAddrs func(ctx context.Context, ns string) (map[int64]string, error)
	SelfAddr         func() string
	Logger           hclog.Logger
}

// Service is one broker's replication state: server is set while this broker is a master that
// serves slaves; client and the learned addresses only on a classic slave.
type Service struct {
	cfg  Config
	stop chan struct{}
	wg   sync.WaitGroup

	server atomic.Pointer[ha.Server]
	// client is set once at Start; atomic because requests (907) may already be served then.
	client atomic.Pointer[ha.Client]
	// serverMu serialises starting and stopping the server on DLedger role changes.
	serverMu sync.Mutex

	mu         sync.Mutex
	masterHA   string // master's HA address learned from the name servers
	masterAddr string // master's remoting address (metadata copy)
	syncNow    chan struct{}
	metaClient *remoting.Client
}

// New returns a service over cfg; Start starts what the role needs.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Service{cfg: cfg, stop: make(chan struct{}), syncNow: make(chan struct{}, 1)}
}

func (s *Service) masterAddrs() (haAddr, addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.masterHA, s.masterAddr
}

// serverConfig is the HA server configuration from the broker's keys.
func (s *Service) serverConfig() ha.ServerConfig {
	c := s.cfg.Broker
	return ha.ServerConfig{
		Addr:                 s.cfg.ListenAddr,
		Source:               source{s.cfg.Acquire},
		Logger:               s.cfg.Logger,
		TransferBatchSize:    c.HATransferBatchSize,
		HeartbeatInterval:    time.Duration(c.HASendHeartbeatInterval) * time.Millisecond,
		HousekeepingInterval: time.Duration(c.HAHousekeepingInterval) * time.Millisecond,
		MaxGapNotInSync:      c.HAMaxGapNotInSync,
		Keys:                 s.cfg.Keys,
	}
}

// Start starts what the classic role needs (the broker calls it before the first registration,
// so the registered HA address is the real one). A group member starts the server on
// leadership (RoleChanged).
func (s *Service) Start() error {
	switch s.cfg.Role {
	case GroupMember:
		return nil
	case Slave:
		return s.startClient()
	default:
		return s.startServer()
	}
}

func (s *Service) startServer() error {
	s.serverMu.Lock()
	defer s.serverMu.Unlock()
	select {
	case <-s.stop: // closing: a late leadership change must not start a server Stop missed
		return nil
	default:
	}
	if s.server.Load() != nil {
		return nil
	}
	srv := ha.NewServer(s.serverConfig())
	if err := srv.Start(); err != nil {
		return fmt.Errorf("start HA server (haListenPort %d): %w", s.cfg.Broker.HAListenPort, err)
	}
	s.server.Store(srv)
	return nil
}

func (s *Service) stopServer() {
	s.serverMu.Lock()
	defer s.serverMu.Unlock()
	if srv := s.server.Swap(nil); srv != nil {
		_ = srv.Close()
		s.cfg.Logger.Info("HA server stopped")
	}
}

// RoleChanged follows DLedger leadership: the ready leader serves legacy slaves, nobody else
// does. A failure to listen is logged (legacy slaves then wait for the next leader or retry).
func (s *Service) RoleChanged(leader bool) {
	if s.cfg.Role != GroupMember {
		return
	}
	if leader {
		if err := s.startServer(); err != nil {
			s.cfg.Logger.Error("leader cannot serve legacy HA slaves", "error", err)
		}
		return
	}
	s.stopServer()
}

// AdvertisedAddr is the HA address registered with the name servers: brokerIP2 and the
// server's real port while it runs, else haListenPort.
func (s *Service) AdvertisedAddr() string {
	if srv := s.server.Load(); srv != nil {
		if _, port, err := net.SplitHostPort(srv.Addr()); err == nil {
			return net.JoinHostPort(s.cfg.Broker.BrokerIP2, port)
		}
	}
	return net.JoinHostPort(s.cfg.Broker.BrokerIP2, strconv.Itoa(s.cfg.Broker.HAListenPort))
}

// Notify wakes the HA transfers after an append (storage's OnDispatch).
func (s *Service) Notify() {
	if srv := s.server.Load(); srv != nil {
		srv.Notify()
	}
}

// Stop stops the client, the server and the metadata copy (the broker calls it before the store
// closes) and waits for the copy loop.
func (s *Service) Stop() {
	s.serverMu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.serverMu.Unlock()
	if c := s.client.Load(); c != nil {
		c.Close()
	}
	s.stopServer()
	if s.metaClient != nil {
		_ = s.metaClient.Close()
	}
	s.wg.Wait()
}

// source reads the commitlog the HA server streams: the local store in classic mode, the state
// machine's current store in DLedger mode (acquired per call, never held while waiting).
type source struct {
	acquire func() (*storage.Store, func(), error)
}

func (s source) CommitLogMinOffset() (int64, error) {
	st, release, err := s.acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	return st.CommitLogMinOffset(), nil
}

func (s source) CommitLogMaxOffset() (int64, error) {
	st, release, err := s.acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	return st.CommitLogMaxOffset(), nil
}

func (s source) ReadCommitLog(offset int64, maxBytes int) ([]byte, error) {
	st, release, err := s.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	return st.ReadCommitLog(offset, maxBytes)
}

// WaitReplicas is SYNC_MASTER's replication wait after a successful local append that ends at
// commitlog offset end: answer SLAVE_NOT_AVAILABLE at once when no slave is in sync, else wait
// up to syncFlushTimeout for a slave to acknowledge end (FLUSH_SLAVE_TIMEOUT otherwise). The
// message is stored either way, as the Go client's SendSlaveNotAvailable/SendFlushSlaveTimeout
// statuses tell the application. Other roles return SUCCESS.
func (s *Service) WaitReplicas(end int64) (int32, string) {
	if s.cfg.Role != SyncMaster {
		return remoting.Success, ""
	}
	srv := s.server.Load()
	if srv == nil {
		return remoting.SlaveNotAvailable, "the message is stored on the master, but no slave is connected and in sync"
	}
	if masterMax, err := (source{s.cfg.Acquire}).CommitLogMaxOffset(); err != nil || !srv.SlaveOK(masterMax) {
		return remoting.SlaveNotAvailable, "the message is stored on the master, but no slave is connected and in sync"
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Broker.SyncFlushWait())
	defer cancel()
	if err := srv.WaitAck(ctx, end); err != nil {
		if errors.Is(err, ha.ErrNoSlave) {
			return remoting.SlaveNotAvailable, "the message is stored on the master, but its slave disconnected before storing it"
		}
		return remoting.FlushSlaveTimeout, fmt.Sprintf("the message is stored on the master, but no slave stored it within syncFlushTimeout %d ms", s.cfg.Broker.SyncFlushTimeout)
	}
	return remoting.Success, ""
}

// WaitsForSlaves reports whether sends wait for a slave (a SYNC_MASTER).
func (s *Service) WaitsForSlaves() bool { return s.cfg.Role == SyncMaster }
