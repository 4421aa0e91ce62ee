package broker

// Classic master/slave replication (package ha) and its use by a DLedger group's leader.
//
//   - ASYNC_MASTER / SYNC_MASTER (classic): the HA server runs on haListenPort for the broker's
//     life. A SYNC_MASTER acknowledges a send only once a slave has stored it (waitReplicas).
//   - SLAVE (classic, brokerId > 0): the HA client follows the master's HA address
//     (haMasterAddress, else the name servers' REGISTER_BROKER answer) and appends what it
//     receives with storage.Store.AppendRaw; the slave refuses sends (role.go writable), serves
//     pulls, and copies the master's metadata every slaveSyncInterval (slaveSyncLoop).
//   - DLedger: the ready leader runs the HA server while it leads (haRoleChanged), so classic
//     slaves registered under the group's brokerName ("legacy slaves") follow the group's
//     commitlog. Replicas are byte-identical, so after a failover a legacy slave resumes on the
//     new leader from its own offset: nothing missing, nothing twice.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/ha"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// slaveSyncInterval is how often a slave copies the master's metadata (RocketMQ's
// SlaveSynchronize period); a new master address triggers a copy at once.
const slaveSyncInterval = 10 * time.Second

// haState is the broker's replication state. server is set while this broker is a master that
// serves slaves; client and the learned addresses only on a classic slave.
type haState struct {
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

func (h *haState) masterAddrs() (haAddr, addr string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.masterHA, h.masterAddr
}

// isClassicSlave: brokerRole=SLAVE outside DLedger mode.
func (b *Broker) isClassicSlave() bool { return b.place.haPart() == haSlave }

// haServerConfig is the HA server configuration from the broker's keys, listening on addr.
func (b *Broker) haServerConfig(addr string) ha.ServerConfig {
	return ha.ServerConfig{
		Addr:                 addr,
		Source:               haSource{b},
		Logger:               b.logger.Named("ha"),
		TransferBatchSize:    b.cfg.HATransferBatchSize,
		HeartbeatInterval:    time.Duration(b.cfg.HASendHeartbeatInterval) * time.Millisecond,
		HousekeepingInterval: time.Duration(b.cfg.HAHousekeepingInterval) * time.Millisecond,
		MaxGapNotInSync:      b.cfg.HAMaxGapNotInSync,
		Keys:                 b.haKeys(), // peerlinks.go
	}
}

// startHA starts what the classic role needs (Start calls it before the first registration,
// so the registered HA address is the real one). DLedger mode starts the server on leadership.
func (b *Broker) startHA() error {
	switch b.place.haPart() {
	case haWhileLeader:
		return nil
	case haSlave:
		return b.startHAClient()
	default:
		return b.startHAServer()
	}
}

func (b *Broker) startHAServer() error {
	b.ha.serverMu.Lock()
	defer b.ha.serverMu.Unlock()
	select {
	case <-b.stop: // closing: a late leadership change must not start a server stopHA missed
		return nil
	default:
	}
	if b.ha.server.Load() != nil {
		return nil
	}
	addr := net.JoinHostPort(listenHost(b.cfg.BrokerIP2), strconv.Itoa(b.cfg.HAListenPort))
	s := ha.NewServer(b.haServerConfig(addr))
	if err := s.Start(); err != nil {
		return fmt.Errorf("start HA server (haListenPort %d): %w", b.cfg.HAListenPort, err)
	}
	b.ha.server.Store(s)
	return nil
}

func (b *Broker) stopHAServer() {
	b.ha.serverMu.Lock()
	defer b.ha.serverMu.Unlock()
	if s := b.ha.server.Swap(nil); s != nil {
		_ = s.Close()
		b.logger.Info("HA server stopped")
	}
}

// haRoleChanged follows DLedger leadership: the ready leader serves legacy slaves, nobody else
// does. A failure to listen is logged (legacy slaves then wait for the next leader or retry).
func (b *Broker) haRoleChanged(role int32) {
	if role == roleLeader {
		if err := b.startHAServer(); err != nil {
			b.logger.Error("leader cannot serve legacy HA slaves", "error", err)
		}
		return
	}
	b.stopHAServer()
}

// haAdvertisedAddr is the HA address registered with the name servers: brokerIP2 and the
// server's real port while it runs, else haListenPort.
func (b *Broker) haAdvertisedAddr() string {
	if s := b.ha.server.Load(); s != nil {
		if _, port, err := net.SplitHostPort(s.Addr()); err == nil {
			return net.JoinHostPort(b.cfg.BrokerIP2, port)
		}
	}
	return net.JoinHostPort(b.cfg.BrokerIP2, strconv.Itoa(b.cfg.HAListenPort))
}

// haNotify wakes the HA transfers after an append (storage's OnDispatch).
func (b *Broker) haNotify() {
	if s := b.ha.server.Load(); s != nil {
		s.Notify()
	}
}

// stopHA stops the client and the server (Close calls it before the store closes).
func (b *Broker) stopHA() {
	if c := b.ha.client.Load(); c != nil {
		c.Close()
	}
	b.stopHAServer()
	if b.ha.metaClient != nil {
		_ = b.ha.metaClient.Close()
	}
}

// haSource reads the commitlog the HA server streams: the local store in classic mode, the
// state machine's current store in DLedger mode (acquired per call, never held while waiting).
type haSource struct{ b *Broker }

func (s haSource) CommitLogMinOffset() (int64, error) {
	st, release, err := s.b.acquireStore()
	if err != nil {
		return 0, err
	}
	defer release()
	return st.CommitLogMinOffset(), nil
}

func (s haSource) CommitLogMaxOffset() (int64, error) {
	st, release, err := s.b.acquireStore()
	if err != nil {
		return 0, err
	}
	defer release()
	return st.CommitLogMaxOffset(), nil
}

func (s haSource) ReadCommitLog(offset int64, maxBytes int) ([]byte, error) {
	st, release, err := s.b.acquireStore()
	if err != nil {
		return nil, err
	}
	defer release()
	return st.ReadCommitLog(offset, maxBytes)
}

// startHAClient starts following the master and copying its metadata.
func (b *Broker) startHAClient() error {
	// A classic slave's store is its own for the broker's lifetime: nothing to release.
	target, _, err := b.acquireStore()
	if err != nil {
		return fmt.Errorf("start HA client: %w", err)
	}
	b.ha.syncNow = make(chan struct{}, 1)
	b.ha.metaClient = remoting.NewClient(remoting.ClientConfig{Logger: b.logger.Named("slave-sync"), TLS: b.clientTLS})
	client := ha.NewClient(ha.ClientConfig{
		MasterAddr: func() string {
			if b.cfg.HAMasterAddress != "" {
				return b.cfg.HAMasterAddress
			}
			addr, _ := b.ha.masterAddrs()
			return addr
		},
		Target:               target,
		FileSize:             b.cfg.MappedFileSizeCommitLog,
		Logger:               b.logger.Named("ha"),
		HeartbeatInterval:    time.Duration(b.cfg.HASendHeartbeatInterval) * time.Millisecond,
		HousekeepingInterval: time.Duration(b.cfg.HAHousekeepingInterval) * time.Millisecond,
		MaxRecordSize:        int64(b.cfg.MaxMessageSize) + 1<<20,
		// The master may have changed (a DLedger failover): ask the name servers again.
		OnDisconnect: b.triggerRegister,
		Credential:   b.haCredential(), // peerlinks.go
	})
	b.ha.client.Store(client)
	client.Start()
	b.wg.Add(1)
	go b.slaveSyncLoop()
	if b.cfg.HAMasterAddress != "" {
		b.logger.Info("slave follows the configured master HA address", "haMasterAddress", b.cfg.HAMasterAddress)
	}
	return nil
}

// onRegisterAnswer takes a name server's REGISTER_BROKER answer: on a classic slave, the
// master's remoting and HA addresses. An empty answer (no master registered now) keeps the
// previous ones.
func (b *Broker) onRegisterAnswer(resp *remoting.Command) {
	if !b.isClassicSlave() {
		return
	}
	var h protocol.RegisterBrokerResponseHeader
	if err := h.FromExt(resp.ExtFields); err != nil {
		return
	}
	b.ha.mu.Lock()
	changedHA := h.HaServerAddr != "" && h.HaServerAddr != b.ha.masterHA
	changedAddr := h.MasterAddr != "" && h.MasterAddr != b.ha.masterAddr
	if changedHA {
		b.ha.masterHA = h.HaServerAddr
	}
	if changedAddr {
		b.ha.masterAddr = h.MasterAddr
	}
	b.ha.mu.Unlock()
	if changedHA || changedAddr {
		b.logger.Info("slave learned its master from the name server", "masterAddr", h.MasterAddr, "masterHaAddr", h.HaServerAddr,
			"followingHa", b.cfg.HAMasterAddress == "")
	}
	if changedAddr {
		select {
		case b.ha.syncNow <- struct{}{}:
		default:
		}
	}
}

// waitReplicas is SYNC_MASTER's replication wait after a successful local append: answer
// SLAVE_NOT_AVAILABLE at once when no slave is in sync, else wait up to syncFlushTimeout for a
// slave to acknowledge the end of the records (FLUSH_SLAVE_TIMEOUT otherwise). The message is
// stored either way, as the Go client's SendSlaveNotAvailable/SendFlushSlaveTimeout statuses
// tell the application. Other roles, DLedger mode and WAIT=false sends return SUCCESS.
func (b *Broker) waitReplicas(h *protocol.SendMessageRequestHeader, results []storage.AppendResult) (int32, string) {
	if b.place.haPart() != haMaster || b.cfg.BrokerRole != config.RoleSyncMaster || len(results) == 0 {
		return remoting.Success, ""
	}
	if message.ParseProperties(h.Properties)[message.PropertyWaitStoreMsgOK] == "false" {
		return remoting.Success, ""
	}
	last := results[len(results)-1]
	end := last.PhysicalOffset + int64(last.Size)
	s := b.ha.server.Load()
	if s == nil || !s.SlaveOK(b.commitLogMax()) {
		return remoting.SlaveNotAvailable, "the message is stored on the master, but no slave is connected and in sync"
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.SyncFlushWait())
	defer cancel()
	if err := s.WaitAck(ctx, end); err != nil {
		if errors.Is(err, ha.ErrNoSlave) {
			return remoting.SlaveNotAvailable, "the message is stored on the master, but its slave disconnected before storing it"
		}
		return remoting.FlushSlaveTimeout, fmt.Sprintf("the message is stored on the master, but no slave stored it within syncFlushTimeout %d ms", b.cfg.SyncFlushTimeout)
	}
	return remoting.Success, ""
}

// slaveSyncLoop copies the master's topic configs, consumer offsets, delay offsets and
// subscription groups every slaveSyncInterval, and at once when a master address is learned.
func (b *Broker) slaveSyncLoop() {
	defer b.wg.Done()
	t := time.NewTicker(slaveSyncInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-b.ha.syncNow:
		}
		if err := b.syncFromMaster(); err != nil {
			b.logger.Warn("slave metadata sync from the master failed", "error", err)
		}
	}
}

// syncFromMaster copies the master's metadata once (RocketMQ's SlaveSynchronize: the four
// GET_ALL_* codes). A master that does not serve GET_ALL_DELAY_OFFSET is skipped for it.
func (b *Broker) syncFromMaster() error {
	_, addr := b.ha.masterAddrs()
	if addr == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	get := func(code int32) (*remoting.Command, error) {
		resp, err := b.ha.metaClient.Invoke(ctx, addr, remoting.NewRequest(code, nil, nil))
		if err != nil {
			return nil, fmt.Errorf("request %d to master %s: %w", code, addr, err)
		}
		return resp, nil
	}
	var errs []error
	if resp, err := get(remoting.GetAllTopicConfig); err != nil {
		errs = append(errs, err)
	} else if resp.Code == remoting.Success {
		var w protocol.TopicConfigSerializeWrapper
		if err := protocol.Decode(resp.Body, &w); err != nil {
			errs = append(errs, fmt.Errorf("decode master topic configs: %w", err))
		} else if w.DataVersion != b.topics.DataVersion() {
			if err := b.topics.ReplaceAll(w); err == nil {
				b.triggerRegister()
			}
		}
	}
	if resp, err := get(remoting.GetAllConsumerOffset); err != nil {
		errs = append(errs, err)
	} else if resp.Code == remoting.Success {
		var w protocol.ConsumerOffsetSerializeWrapper
		if err := protocol.Decode(resp.Body, &w); err != nil {
			errs = append(errs, fmt.Errorf("decode master consumer offsets: %w", err))
		} else {
			b.offsets.ReplaceAll(w)
		}
	}
	if resp, err := get(remoting.GetAllDelayOffset); err != nil {
		errs = append(errs, err)
	} else if resp.Code == remoting.Success && len(resp.Body) > 0 {
		// The master's delay progress: the scheduler continues from it if this slave is ever
		// made a master (its table is persisted as delayOffset.json like the master's).
		var w meta.DelayOffsetWrapper
		if err := protocol.Decode(resp.Body, &w); err != nil {
			errs = append(errs, fmt.Errorf("decode master delay offsets: %w", err))
		} else {
			b.delayOffsets.ReplaceAll(w)
		}
	}
	if resp, err := get(remoting.GetAllSubscriptionGroupConfig); err != nil {
		errs = append(errs, err)
	} else if resp.Code == remoting.Success {
		var w protocol.SubscriptionGroupWrapper
		if err := protocol.Decode(resp.Body, &w); err != nil {
			errs = append(errs, fmt.Errorf("decode master subscription groups: %w", err))
		} else if w.DataVersion != b.groups.DataVersion() {
			_ = b.groups.ReplaceAll(w)
		}
	}
	b.checkSlaveID(ctx)
	return errors.Join(errs...)
}

// checkSlaveID logs an error when another broker holds this slave's brokerId in the group (a
// legacy slave of a DLedger group whose id collides with a member's peer index + 1): the name
// servers would keep only one of the two.
func (b *Broker) checkSlaveID(ctx context.Context) {
	for _, ns := range b.cfg.NamesrvAddrs() {
		addrs, err := b.routeBrokerAddrs(ctx, ns)
		if err != nil {
			continue
		}
		if other, ok := addrs[b.cfg.BrokerID]; ok && other != b.brokerAddr {
			b.logger.Error("another broker is registered under this slave's brokerId; choose a brokerId no member of the group uses (for a legacy slave of a DLedger group: 10 or more)",
				"brokerName", b.cfg.BrokerName, "brokerId", b.cfg.BrokerID, "other", other)
		}
		return
	}
}

// haStatus is GET_BROKER_HA_STATUS's answer.
func (b *Broker) haStatus() protocol.HARuntimeInfo {
	var info protocol.HARuntimeInfo
	info.HAConnectionInfo = []protocol.HAConnectionRuntimeInfo{}
	info.HAClientRuntimeInfo.MasterOffset = -1
	if s := b.ha.server.Load(); s != nil {
		masterMax, _ := haSource{b}.CommitLogMaxOffset()
		info.Master = true
		info.MasterCommitLogMaxOffset = masterMax
		for _, c := range s.Status() {
			in := s.InSync(c, masterMax)
			if in {
				info.InSyncSlaveNums++
			}
			diff := int64(-1)
			if c.AckOffset >= 0 {
				diff = max(0, masterMax-c.AckOffset)
			}
			info.HAConnectionInfo = append(info.HAConnectionInfo, protocol.HAConnectionRuntimeInfo{
				Addr: c.Addr, SlaveAckOffset: c.AckOffset, Diff: diff, InSync: in,
				TransferredByteInSecond: int64(c.BytesPerSecond), TransferFromWhere: c.TransferFrom,
			})
		}
	} else if b.place.haPart() == haMaster {
		info.Master = true // a classic master whose server failed to start: no slaves
	}
	if !info.Master {
		info.HAClientRuntimeInfo.MaxOffset, _ = haSource{b}.CommitLogMaxOffset()
	}
	if c := b.ha.client.Load(); c != nil {
		st := c.Status()
		info.HAClientRuntimeInfo = protocol.HAClientRuntimeInfo{
			MasterAddr: st.MasterAddr, TransferredByteInSecond: int64(st.BytesPerSecond), MaxOffset: st.MaxOffset,
			LastReadTimestamp: st.LastRead.UnixMilli(), LastWriteTimestamp: st.LastWrite.UnixMilli(),
			IsActivated: st.Connected, MasterOffset: st.MasterOffset,
		}
	}
	return info
}

func (b *Broker) handleHAStatus(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return b.jsonResponse(req, b.haStatus())
}

// addHARuntimeInfo adds the replication keys to GET_BROKER_RUNTIME_INFO: on a master the
// connected slaves and the furthest-behind one; on a slave its master and how far behind it is.
func (b *Broker) addHARuntimeInfo(table map[string]string) {
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	table["brokerId"] = i64(b.brokerID())
	info := b.haStatus()
	if s := b.ha.server.Load(); s != nil {
		table["haServerAddr"] = b.haAdvertisedAddr()
		table["haConnections"] = strconv.Itoa(len(info.HAConnectionInfo))
		table["haInSyncSlaves"] = strconv.Itoa(info.InSyncSlaveNums)
		behind := int64(0)
		for _, c := range info.HAConnectionInfo {
			if c.Diff < 0 {
				behind = max(behind, info.MasterCommitLogMaxOffset)
			} else {
				behind = max(behind, c.Diff)
			}
		}
		table["haSlaveFallBehindMax"] = i64(behind)
	}
	if b.ha.client.Load() != nil {
		haAddr, addr := b.ha.masterAddrs()
		if b.cfg.HAMasterAddress != "" {
			haAddr = b.cfg.HAMasterAddress
		}
		c := info.HAClientRuntimeInfo
		table["masterAddr"] = addr
		table["masterHaAddr"] = haAddr
		table["haConnected"] = strconv.FormatBool(c.IsActivated)
		table["slaveMaxOffset"] = i64(c.MaxOffset)
		table["masterOffsetSeen"] = i64(c.MasterOffset)
		table["slaveFallBehind"] = i64(max(0, c.MasterOffset-c.MaxOffset))
	}
}
