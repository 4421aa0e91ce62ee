package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/acl"
	"rocketraft/broker/clients"
	"rocketraft/broker/diskfail"
	"rocketraft/broker/longpoll"
	"rocketraft/broker/meta"
	"rocketraft/broker/replication"
	"rocketraft/broker/schedule"
	"rocketraft/broker/txn"
	"rocketraft/config"
	"rocketraft/dledger"
	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// CommitLog is where the broker appends encoded records: straight into the
// local store in classic mode, through the Raft group in DLedger mode. A call
// returns once the records are stored as durably as the configuration asks.
type CommitLog interface {
	Append(ctx context.Context, records [][]byte) ([]storage.AppendResult, error)
}

// asyncCommitLog is a CommitLog that can also hand an append's outcome to its caller instead of
// a waiting goroutine (DLedger mode: the Raft batcher answers all sends of an entry from the one
// goroutine that saw it commit): AppendCall returns at once and c.done hears the outcome exactly
// once (appendcall.go).
type asyncCommitLog interface {
	AppendCall(c *appendCall)
}

// Broker is one broker process's serving state.
type Broker struct {
	// peerKey is the group secret (peerSecret/peerSecretFile; nil: none); securityWarnings
	// the peer ports open beyond loopback without authentication (peerlinks.go).
	peerKey          []byte
	securityWarnings []string
	cfg              *config.Broker
	logger           hclog.Logger
	storeHost        netip.AddrPort
	brokerAddr       string

	// place is this node's place in its group (place.go), decided once in New; commitLog is
	// where sends append (the place, timed in DLedger mode: metrics.go).
	place     place
	commitLog CommitLog

	topics   *meta.Topics
	groups   *meta.Groups
	offsets  *meta.Offsets
	clients  *clients.Manager
	longPoll *longpoll.Holder
	server   *remoting.Server
	nsClient *remoting.Client
	// serverTLS and clientTLS are the remoting port's TLS and that of the broker's own
	// connections (tls.go); nil when off.
	serverTLS *remoting.ServerTLS
	clientTLS *tls.Config
	// DLedger mode: writes a follower forwards to the leader go through fwdClient (fwd,
	// forward.go, learns the leader's address).
	fwdClient *remoting.Client
	stats     *stats
	metrics   *brokerMetrics // Prometheus (metrics.go); /metrics on httpPort
	// reg keeps the node registered with the name servers (register.go); aclGate checks and
	// signs requests (acl.go); status serves the HTTP port (http.go).
	reg     *registrar
	aclGate *aclGate
	status  *statusPages
	// txn: END_TRANSACTION and the check-back (package broker/txn, wired in transaction.go).
	txn *txn.Service
	// inMemoryBytes is accessMessageInMemoryMaxRatio percent of physical RAM: how far behind the
	// commitlog end a pull may read before it is suggested a slave (suggestBroker).
	inMemoryBytes int64
	// tables is the one path that changes the metadata tables (metachange.go); the fields
	// above and delayOffsets below are the same tables, for readers.
	tables *tables
	// Delay levels (schedule.go): messageDelayLevel parsed, and the scheduler's progress per
	// level (replicated in DLedger mode).
	delayLevels  []time.Duration
	delayOffsets *meta.DelayOffsets
	sched        *schedule.Scheduler // delivers them (schedule.go wires it)
	// locks serves orderly consumption's queue locks (locks.go).
	locks *queueLocks
	// offsetH serves the consumer-offset requests (offsets.go, resetoffset.go).
	offsetH *offsetHandlers
	// repl is classic master/slave replication (package broker/replication, wired in ha.go):
	// the HA server of a master (or of a DLedger leader serving legacy slaves), the HA client
	// and metadata copy of a slave.
	repl *replication.Service
	// acl checks every request when aclEnable is set (acl.go); nil otherwise. rt holds the
	// keys UPDATE_BROKER_CONFIG may change at runtime (brokerconfig.go).
	acl *acl.Store
	rt  runtimeConfig
	// names refuses invalid topic and group names for every handler that records one (names.go).
	names nameGuard
	// pop is POP consumption's in-flight table (pop.go, popstate.go).
	pop *popService
	// puller serves pulls (pull.go); queryH the lookups of stored messages (query.go).
	puller *puller
	queryH *queryHandlers
	// sd is what a graceful shutdown drains (shutdown.go).
	sd shutdownState
	// raftAdmin serves the Raft administration codes and watches the group's membership
	// (raftadmin.go, membership.go, digestcheck.go).
	raftAdmin *raftAdmin

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once

	// disk takes the node out of service on a failed write (DLedger mode, broker/diskfail).
	disk *diskfail.Guard
	// fwd forwards what a follower may not serve to the leader (forward.go); sender serves
	// sends, send-backs, END_TRANSACTION and POP batch acks (send.go).
	fwd    *forwarder
	sender *sender
	// The admin request handlers (built at the end of New): topics (handle_topics.go,
	// topicattr.go), groups (handle_groups.go), clients (clienthandlers.go,
	// handle_connections.go), configuration (brokerconfig.go, getbrokerconfig.go) and runtime
	// figures (handle_runtime.go, statsdata.go).
	topicH   *topicHandlers
	groupH   *groupHandlers
	clientH  *clientHandlers
	configH  *configHandlers
	runtimeH *runtimeHandlers
}

// New opens the store and metadata under cfg's paths. It does not listen yet.
func New(cfg *config.Broker, logger hclog.Logger) (*Broker, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	b := &Broker{
		cfg:    cfg,
		logger: logger,
		stop:   make(chan struct{}),
		stats:  newStats(),
		names:  nameGuard{logger},
		reg:    newRegistrar(), // wired below; Raft's replay may trigger it meanwhile
	}
	reads := storeReads{acquire: b.acquireStore}
	b.longPoll = longpoll.New(longpoll.Config{MaxOffset: reads.queueMaxOffset})
	gate, err := openACLGate(cfg, logger)
	if err != nil {
		return nil, err
	}
	b.aclGate, b.acl = gate, gate.store
	peerKey, perr := cfg.PeerKey()
	if perr != nil {
		return nil, fmt.Errorf("peerSecret: %w", perr)
	}
	b.peerKey = peerKey
	// The metadata tables exist before the commitlog opens: in DLedger mode the state machine
	// resets them when it opens (fsm.New) and Raft's restore and replay fill them during and
	// right after dledger.Open, so they are Raft's, kept in files of their own under the node's
	// Raft directory (a classic config/ under the same root is never overwritten).
	b.inMemoryBytes = physicalMemory() * int64(cfg.AccessMessageInMemoryMaxRatio) / 100
	spec := newPlace(cfg)
	configDir := spec.configDir
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		return nil, fmt.Errorf("create config directory: %w", err)
	}
	if b.topics, err = meta.OpenTopics(filepath.Join(configDir, "topics.json"), logger.Named("topics")); err != nil {
		return nil, fmt.Errorf("open topic table: %w", err)
	}
	if b.groups, err = meta.OpenGroups(filepath.Join(configDir, "subscriptionGroup.json"), logger.Named("groups")); err != nil {
		return nil, fmt.Errorf("open subscription groups: %w", err)
	}
	if b.offsets, err = meta.OpenOffsets(filepath.Join(configDir, "consumerOffset.json"), logger.Named("offsets")); err != nil {
		return nil, fmt.Errorf("open consumer offsets: %w", err)
	}
	if err := b.openSchedule(configDir); err != nil {
		return nil, err
	}
	// POP's table is one of the metadata tables: the service exists before the tables, which it
	// then changes through (below).
	if b.pop, err = newPopService(popDeps{cfg: cfg, topics: b.topics, stats: b.stats, acquire: b.acquireStore,
		stop: b.stop}, configDir, spec.ownsTables); err != nil {
		return nil, err
	}
	b.topics.SetAutoCreateTopicEnable(cfg.AutoCreateTopicEnable)
	flushEvery := time.Duration(cfg.MetadataFlushIntervalMs) * time.Millisecond
	b.topics.SetFlushInterval(flushEvery)
	b.groups.SetFlushInterval(flushEvery)
	// Before the commitlog: in DLedger mode Raft's replay applies queue locks to it.
	b.clients = clients.NewManager(clients.Config{
		ChannelExpiry: time.Duration(cfg.ClientChannelExpiredTimeout) * time.Millisecond,
		Logger:        logger.Named("clients"),
		NotifyEnabled: func(group string) bool {
			gc := b.groups.Get(group)
			return gc == nil || gc.NotifyConsumerIdsChangedEnable
		},
	})
	// Before the place opens: the classic place applies through it, the Raft state machine
	// drives it (replay included); it gets the place once that is open.
	b.tables = &tables{cfg: cfg, logger: logger, topics: b.topics, groups: b.groups, offsets: b.offsets,
		delays: b.delayOffsets, clients: b.clients, popTable: b.pop.table, applyPop: b.pop.apply,
		topicsChanged: b.reg.trigger}
	b.pop.commit, b.pop.groupOrCreate = b.tables.changeMeta, b.tables.groupOrCreate
	b.pop.committedOffset, b.pop.commitOffset = b.tables.committedOffset, b.tables.commitOffset
	if b.serverTLS, b.clientTLS, err = remotingTLS(cfg); err != nil {
		return nil, err
	}
	b.disk = diskfail.New(logger)
	b.repl = b.newReplication(spec.ha) // before the store: its dispatch callback notifies the HA server
	// The last step that can fail: the local store in classic mode, the Raft group with its
	// state machine (driving the metadata tables) in DLedger mode.
	if b.place, err = spec.open(b); err != nil {
		return nil, err
	}
	b.commitLog = b.place
	b.tables.place = b.place
	// brokerPermission and slaveReadEnable as UPDATE_BROKER_CONFIG leaves them (brokerconfig.go).
	rt := &b.rt
	permission := func() int32 { return rt.permission(cfg) }
	slaveRead := func() bool { return rt.slaveReadEnabled(cfg) }
	b.puller = &puller{cfg: cfg, reads: reads, topics: b.topics, groups: b.groups, offsets: b.offsets,
		clients: b.clients, longPoll: b.longPoll, stats: b.stats, inMemoryBytes: b.inMemoryBytes,
		haPart: b.place.haPart, brokerID: b.place.brokerID, permission: permission,
		slaveReadEnable: slaveRead, refuseBadNames: b.names.refuseBadNames,
		groupOrCreate: b.tables.groupOrCreate, commitPullOffset: b.tables.commitPullOffset}
	b.queryH = &queryHandlers{acquire: b.acquireStore}
	b.wireScheduler()
	b.txn = b.newTxnService()
	b.place.onRoleChange(b.roleChanged)
	b.nsClient = remoting.NewClient(remoting.ClientConfig{Logger: logger.Named("namesrv-client"), BeforeRequest: b.aclGate.outgoingHook(), TLS: b.clientTLS})
	// Used only where the place forwards writes (forward.go); it dials nothing until then.
	b.fwdClient = remoting.NewClient(remoting.ClientConfig{Logger: logger.Named("forward-client"), BeforeRequest: b.aclGate.outgoingHook(), TLS: b.clientTLS})
	b.fwd = &forwarder{place: b.place, client: b.fwdClient, nsClient: b.nsClient, cfg: cfg, self: b.Addr, stop: b.stop, logger: logger}
	b.pop.forwardOrRefuse = b.fwd.forwardOrRefuse // POP is built before the place, the forwarder after
	b.pop.refuseBadNames = b.names.refuseBadNames
	b.locks = &queueLocks{clients: b.clients, place: b.place, refuseBadNames: b.names.refuseBadNames,
		forwardOrRefuse: b.fwd.forwardOrRefuse, brokerName: cfg.BrokerName}
	b.offsetH = &offsetHandlers{cfg: cfg, logger: logger, tables: b.tables, place: b.place, topics: b.topics,
		groups: b.groups, clients: b.clients, refuseBadNames: b.names.refuseBadNames, forwardOrRefuse: b.fwd.forwardOrRefuse,
		forwardRead: b.fwd.forwardRead, isClassicSlave: b.isClassicSlave}
	b.raftAdmin = &raftAdmin{place: b.place, cfg: cfg, logger: logger, aclOn: b.acl != nil, addr: b.Addr,
		ns: b.nsClient, peers: b.fwdClient, forward: b.fwd.forwardWrite, leaderAddr: b.fwd.leaderBrokerAddr,
		unregister: b.reg.unregisterAll, wg: &b.wg, stop: b.stop}
	b.metrics = newBrokerMetrics(metricsSources{cfg: cfg, stats: b.stats, topics: b.topics, groups: b.groups, offsets: b.offsets, place: b.place})
	b.commitLog = b.metrics.timed(b.commitLog) // DLedger mode: appends timed
	b.reg.registrarDeps = registrarDeps{cfg: cfg, logger: logger, topics: b.topics, place: b.place, invoke: b.nsClient.Invoke,
		addr: b.Addr, perm: permission, haAddr: b.repl.AdvertisedAddr, onAnswer: b.repl.OnRegisterAnswer, draining: b.sd.draining.Load}
	// status gets storeStats once runtimeH, which reads status's HTTP address and rates, exists.
	b.status = &statusPages{cfg: cfg, logger: logger, place: b.place, topics: b.topics, offsets: b.offsets, clients: b.clients,
		stats: b.stats, metrics: b.metrics.registry.Handler(), addr: b.Addr, raftStatus: b.raftAdmin.raftStatus,
		committedOffset: b.tables.committedOffset}
	b.disk.SetLeave(b.leaveOnDiskFailure)
	b.sender = &sender{
		cfg: cfg, logger: logger, place: b.place, commitLog: b.commitLog, topics: b.topics, stats: b.stats,
		delayLevels: b.delayLevels, fwd: b.fwd, txn: b.txn,
		storeHost:              func() netip.AddrPort { return b.storeHost },
		ensureTopic:            b.tables.ensureTopic,
		createTopicFromDefault: b.tables.createTopicFromDefault,
		groupOrCreate:          b.tables.groupOrCreate,
		brokerPermission:       permission,
		triggerRegister:        b.reg.trigger,
		refuseBadNames:         b.names.refuseBadNames,
		applyDelay:             b.applyDelay,
		waitReplicas:           b.waitReplicas,
		commitOffset:           b.tables.commitOffset,
	}
	if spec.ownsTables {
		b.sender.topicsSaved = b.topics.Sync
	}
	// The admin request handlers; their func values are Broker methods other parts own (the
	// metadata change path, forwarding, registration, role).
	b.topicH = &topicHandlers{cfg: b.cfg, topics: b.topics, metaMu: &b.tables.names, logger: b.logger,
		acquire: b.acquireStore, forward: b.fwd.forwardOrRefuse, changeMeta: b.tables.changeMeta, answerChange: b.tables.answerChange,
		triggerRegister: b.reg.trigger}
	b.groupH = &groupHandlers{cfg: b.cfg, topics: b.topics, groups: b.groups, offsets: b.offsets,
		clients: b.clients, acquire: b.acquireStore, committedOffset: b.tables.committedOffset, forward: b.fwd.forwardOrRefuse,
		answerChange: b.tables.answerChange}
	b.clientH = &clientHandlers{cfg: b.cfg, groups: b.groups, clients: b.clients, place: b.place,
		logger: b.logger, groupOrCreate: b.tables.groupOrCreate, ensureTopic: b.tables.ensureTopic, triggerRegister: b.reg.trigger,
		refuseBadName: b.names.refuseBadName}
	b.configH = &configHandlers{cfg: b.cfg, rt: &b.rt, logger: b.logger, brokerID: b.brokerID,
		triggerRegisterNow: b.reg.triggerNow}
	b.runtimeH = &runtimeHandlers{cfg: b.cfg, topics: b.topics, stats: b.stats, acquire: b.acquireStore,
		roleName: b.roleName, addr: b.Addr, addHARuntimeInfo: b.addHARuntimeInfo, httpAddr: &b.status.httpAddr, rates: &b.status.rates}
	b.status.storeStats = b.runtimeH.storeStats
	return b, nil
}

// acquireStore returns the store reads go to and the function that gives it back. In DLedger
// mode it is the state machine's current store, which a snapshot Restore replaces: Restore
// waits for every holder before closing it, so call release as soon as the reads are done,
// never while waiting for anything (a parked pull, a Raft proposal, a client), and do not
// acquire again while holding it (pass the store down). During a restore's swap it waits for
// the new store; its errors are retryable (storeUnavailable answers them).
func (b *Broker) acquireStore() (*storage.Store, func(), error) { return b.place.acquire() }

// noRelease is classic mode's release: the local store lives as long as the broker.
func noRelease() {}

// storeUnavailable answers a request whose store could not be acquired (DLedger mode: the
// broker is closing, or a snapshot restore failed): SERVICE_NOT_AVAILABLE, which clients retry.
func storeUnavailable(req *remoting.Command, err error) *remoting.Command {
	return req.NewResponse(remoting.ServiceNotAvailable, "service not available now: the store cannot be read: "+err.Error())
}

func (b *Broker) storeConfig() storage.Config {
	c := storage.DefaultConfig(b.cfg.StorePathRootDir)
	c.StorePathCommitLog = b.cfg.StorePathCommitLog
	c.MappedFileSizeCommitLog = b.cfg.MappedFileSizeCommitLog
	c.MappedFileSizeConsumeQueue = b.cfg.MapedFileSizeConsumeQueue
	c.FlushDiskType = storage.FlushDiskType(b.cfg.FlushDiskType)
	c.FlushIntervalCommitLog = b.cfg.FlushInterval()
	c.SyncFlushTimeout = b.cfg.SyncFlushWait()
	c.FileReservedTime = b.cfg.FileReservedTime
	c.DeleteWhen = b.cfg.DeleteWhen
	c.DiskMaxUsedSpaceRatio = b.cfg.DiskMaxUsedSpaceRatio
	c.MaxMessageSize = b.cfg.MaxMessageSize
	c.MessageIndexEnable = b.cfg.MessageIndexEnable
	c.MaxHashSlotNum = b.cfg.MaxHashSlotNum
	c.MaxIndexNum = b.cfg.MaxIndexNum
	c.Logger = b.logger.Named("store")
	c.OnDispatch = func(topic string, queueID int32, queueOffset int64, tagsCode int64) {
		b.longPoll.Notify(topic, queueID, queueOffset, tagsCode)
		b.repl.Notify()
	}
	return c
}

// Start listens on listenPort, registers with the name servers and starts the
// periodic tasks.
func (b *Broker) Start() error {
	b.warnPeerSecurity() // peerlinks.go
	addr := net.JoinHostPort(listenHost(b.cfg.BrokerIP1), strconv.Itoa(b.cfg.ListenPort))
	sc := remoting.ServerConfig{
		Addr:           addr,
		Logger:         b.logger.Named("remoting"),
		IdleTimeout:    120 * time.Second,
		OnRequest:      b.observe,   // shutdown.go: metrics and the in-flight count
		Intercept:      b.intercept, // shutdown.go: ACL, and the sends a shutdown drains
		TLS:            b.serverTLS,
		MaxConnections: b.cfg.MaxConnections,
		FlatExtCodes:   b.flatExtCodes(),
	}
	b.server = remoting.NewServer(sc)
	b.registerHandlers(b.server)
	b.server.OnDisconnect(b.clients.ConnClosed)
	if err := b.server.Start(); err != nil {
		return err
	}
	b.aclGate.warnACLOff(addr) // acl.go
	// The advertised address uses brokerIP1 and the real port (listenPort 0 picks one).
	_, port, _ := net.SplitHostPort(b.server.Addr())
	b.brokerAddr = net.JoinHostPort(b.cfg.BrokerIP1, port)
	ap, err := netip.ParseAddrPort(b.brokerAddr)
	if err != nil {
		_ = b.server.Close()
		return fmt.Errorf("brokerIP1 %q is not an IP address: %w", b.cfg.BrokerIP1, err)
	}
	b.storeHost = ap
	if err := b.status.start(b.stop, b.securityWarnings); err != nil {
		_ = b.server.Close()
		return fmt.Errorf("listen on httpPort %d: %w", b.cfg.HTTPPort, err)
	}
	if err := b.repl.Start(); err != nil {
		_ = b.server.Close()
		return err
	}

	b.wg.Add(3)
	b.place.start(b) // DLedger mode: the role watch (role.go)
	go func() {
		defer b.wg.Done()
		b.reg.run(b.stop)
	}()
	go func() {
		defer b.wg.Done()
		b.longPoll.Run(b.stop)
	}()
	go b.housekeeping()
	b.wg.Add(1)
	go func() { // delay delivery: idles unless this node may deliver (package broker/schedule)
		defer b.wg.Done()
		b.sched.Run(b.stop)
	}()
	b.wg.Add(1)
	go func() { // transactions: checks only while this node is the master (package broker/txn)
		defer b.wg.Done()
		b.txn.Run(b.stop)
	}()
	if b.acl != nil {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.acl.Watch(aclReloadInterval, b.stop)
		}()
	}
	b.logger.Info("broker started", "cluster", b.cfg.BrokerClusterName, "broker", b.cfg.BrokerName,
		"brokerId", b.brokerID(), "role", b.roleName(), "dleger", b.cfg.EnableDLegerCommitLog, "addr", b.brokerAddr,
		"store", b.cfg.StorePathRootDir, "flush", b.cfg.FlushDiskType, "namesrv", b.cfg.NamesrvAddr)
	return nil
}

// listenHost binds every interface unless brokerIP1 is loopback, so a broker
// configured for 127.0.0.1 is never reachable from outside the host.
func listenHost(ip string) string {
	if a, err := netip.ParseAddr(ip); err == nil && a.IsLoopback() {
		return ip
	}
	return ""
}

// Addr is the address clients use (brokerIP1:port).
func (b *Broker) Addr() string { return b.brokerAddr }

// Close shuts down gracefully (the order is explained in shutdown.go): leadership hand-off,
// unregistration, a drain of the clients still sending here, the in-flight sends, then the
// store is flushed and closed cleanly (so the next start needs no crash recovery).
func (b *Broker) Close() error {
	var err error
	b.closeOnce.Do(func() {
		b.place.handOff() // DLedger mode: queued offsets proposed, leadership handed off
		if b.server != nil {
			b.sd.draining.Store(true) // the registrar registers no more
			b.reg.unregisterAll()
			b.drainClients()
			b.waitInflight()
		}
		close(b.stop)
		b.repl.Stop()
		if b.server != nil {
			_ = b.server.Close()
		}
		b.wg.Wait()
		_ = b.nsClient.Close()
		_ = b.fwdClient.Close()
		if perr := b.offsets.Persist(); perr != nil {
			b.logger.Error("persist consumer offsets at shutdown", "error", perr)
		}
		_ = b.delayOffsets.Persist() // logged by the table
		if perr := b.pop.persist(); perr != nil {
			b.logger.Error("persist POP state at shutdown", "error", perr)
		}
		// Coalesced table writes still pending (meta saver) are written once nothing changes the
		// tables any more: in DLedger mode after the state machine stopped applying, in classic
		// mode before the store (and with it the lock on its directory) is released.
		err = b.place.close(b.flushTables)
	})
	return err
}

// flushTables writes the topic and subscription-group tables' pending changes.
func (b *Broker) flushTables() {
	if err := b.topics.Flush(); err != nil {
		b.logger.Error("persist topic table at shutdown", "error", err)
	}
	if err := b.groups.Flush(); err != nil {
		b.logger.Error("persist subscription groups at shutdown", "error", err)
	}
}

func (b *Broker) housekeeping() {
	defer b.wg.Done()
	offsetTick := time.NewTicker(time.Duration(max(b.cfg.FlushConsumerOffsetInterval, 100)) * time.Millisecond)
	scanTick := time.NewTicker(10 * time.Second)
	tpsTick := time.NewTicker(time.Second)
	defer tpsTick.Stop()
	defer offsetTick.Stop()
	defer scanTick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-offsetTick.C:
			if err := b.offsets.Persist(); err != nil {
				b.logger.Error("persist consumer offsets", "error", err)
			}
			if err := b.pop.persist(); err != nil {
				b.logger.Error("persist POP state", "error", err)
			}
		case now := <-scanTick.C:
			b.clients.ScanExpired(now)
		case <-tpsTick.C:
			b.stats.sample()
		}
	}
}

// errorCode maps a store error to the response code clients react to correctly.
func errorCode(err error) (int32, string) {
	switch {
	case errors.Is(err, storage.ErrMessageIllegal):
		return remoting.MessageIllegal, err.Error()
	case errors.Is(err, message.ErrInvalidName):
		return remoting.InvalidParameter, err.Error()
	case errors.Is(err, storage.ErrDiskFull):
		return remoting.ServiceNotAvailable, "service not available now, maybe disk full: " + err.Error()
	case errors.Is(err, storage.ErrQueueOffsetStale):
		return remoting.SystemError, "not stored: the leader's queue offsets had moved on (a leader change or a deleted topic); retry: " + err.Error()
	case errors.Is(err, dledger.ErrNotLeader):
		return remoting.ServiceNotAvailable, "service not available now: this node is not the Raft leader: " + err.Error()
	case errors.Is(err, dledger.ErrLeadershipLost), errors.Is(err, dledger.ErrShutdown),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return remoting.SystemError, "the replicated append did not finish, its outcome is unknown (retry; it may be stored twice): " + err.Error()
	case errors.Is(err, storage.ErrStoreClosed), errors.Is(err, fsm.ErrClosed):
		return remoting.ServiceNotAvailable, "service not available now: the store is shutting down"
	case errors.Is(err, fsm.ErrNoStore):
		return remoting.ServiceNotAvailable, "service not available now: " + err.Error()
	default:
		return remoting.SystemError, err.Error()
	}
}
