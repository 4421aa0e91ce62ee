package replication

import (
	"context"
	"errors"
	"fmt"
	"time"

	"rocketraft/broker/meta"
	"rocketraft/ha"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// startClient starts following the master and copying its metadata. A classic slave's store is
// its own for its life, so it is acquired once and never released.
func (s *Service) startClient() error {
	local, _, err := s.cfg.Acquire()
	if err != nil {
		return fmt.Errorf("HA client: %w", err)
	}
	c := s.cfg.Broker
	s.metaClient = remoting.NewClient(remoting.ClientConfig{Logger: s.cfg.Logger.Named("slave-sync"), TLS: s.cfg.ClientTLS})
	client := ha.NewClient(ha.ClientConfig{
		MasterAddr: func() string {
			if c.HAMasterAddress != "" {
				return c.HAMasterAddress
			}
			addr, _ := s.masterAddrs()
			return addr
		},
		Target:               local,
		FileSize:             c.MappedFileSizeCommitLog,
		Logger:               s.cfg.Logger,
		HeartbeatInterval:    time.Duration(c.HASendHeartbeatInterval) * time.Millisecond,
		HousekeepingInterval: time.Duration(c.HAHousekeepingInterval) * time.Millisecond,
		MaxRecordSize:        int64(c.MaxMessageSize) + 1<<20,
		// The master may have changed (a DLedger failover): ask the name servers again.
		OnDisconnect: s.cfg.TriggerRegister,
		Credential:   s.cfg.Credential,
	})
	s.client.Store(client)
	client.Start()
	s.wg.Add(1)
	go s.syncLoop()
	if c.HAMasterAddress != "" {
		s.cfg.Logger.Info("slave follows the configured master HA address", "haMasterAddress", c.HAMasterAddress)
	}
	return nil
}

// OnRegisterAnswer takes a name server's REGISTER_BROKER answer: on a classic slave, the
// master's remoting and HA addresses. An empty answer (no master registered now) keeps the
// previous ones.
func (s *Service) OnRegisterAnswer(resp *remoting.Command) {
	if s.cfg.Role != Slave {
		return
	}
	var h protocol.RegisterBrokerResponseHeader
	if err := h.FromExt(resp.ExtFields); err != nil {
		return
	}
	s.mu.Lock()
	changedHA := h.HaServerAddr != "" && h.HaServerAddr != s.masterHA
	changedAddr := h.MasterAddr != "" && h.MasterAddr != s.masterAddr
	if changedHA {
		s.masterHA = h.HaServerAddr
	}
	if changedAddr {
		s.masterAddr = h.MasterAddr
	}
	s.mu.Unlock()
	if changedHA || changedAddr {
		s.cfg.Logger.Info("slave learned its master from the name server", "masterAddr", h.MasterAddr, "masterHaAddr", h.HaServerAddr,
			"followingHa", s.cfg.Broker.HAMasterAddress == "")
	}
	if changedAddr {
		select {
		case s.syncNow <- struct{}{}:
		default:
		}
	}
}

// syncLoop copies the master's topic configs, consumer offsets, delay offsets and subscription
// groups every SyncInterval, and at once when a master address is learned.
func (s *Service) syncLoop() {
	defer s.wg.Done()
	t := time.NewTicker(SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.syncNow:
		}
		if err := s.SyncFromMaster(); err != nil {
			s.cfg.Logger.Warn("slave metadata sync from the master failed", "error", err)
		}
	}
}

// SyncFromMaster copies the master's metadata once (RocketMQ's SlaveSynchronize: the four
// GET_ALL_* codes). A master that does not serve GET_ALL_DELAY_OFFSET is skipped for it.
func (s *Service) SyncFromMaster() error {
	_, addr := s.masterAddrs()
	if addr == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	get := func(code int32) (*remoting.Command, error) {
		resp, err := s.metaClient.Invoke(ctx, addr, remoting.NewRequest(code, nil, nil))
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
		} else if w.DataVersion != s.cfg.Topics.DataVersion() {
			if err := s.cfg.Topics.ReplaceAll(w); err == nil {
				s.cfg.TriggerRegister()
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
			s.cfg.Offsets.ReplaceAll(w)
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
			s.cfg.DelayOffsets.ReplaceAll(w)
		}
	}
	if resp, err := get(remoting.GetAllSubscriptionGroupConfig); err != nil {
		errs = append(errs, err)
	} else if resp.Code == remoting.Success {
		var w protocol.SubscriptionGroupWrapper
		if err := protocol.Decode(resp.Body, &w); err != nil {
			errs = append(errs, fmt.Errorf("decode master subscription groups: %w", err))
		} else if w.DataVersion != s.cfg.Groups.DataVersion() {
			_ = s.cfg.Groups.ReplaceAll(w)
		}
	}
	s.checkSlaveID(ctx)
	return errors.Join(errs...)
}

// checkSlaveID logs an error when another broker holds this slave's brokerId in the group (a
// legacy slave of a DLedger group whose id collides with a member's peer index + 1): the name
// servers would keep only one of the two.
func (s *Service) checkSlaveID(ctx context.Context) {
	c := s.cfg.Broker
	for _, ns := range c.NamesrvAddrs() {
		addrs, err := s.cfg.RouteBrokerAddrs(ctx, ns)
		if err != nil {
			continue
		}
		if other, ok := addrs[c.BrokerID]; ok && other != s.cfg.SelfAddr() {
			s.cfg.Logger.Error("another broker is registered under this slave's brokerId; choose a brokerId no member of the group uses (for a legacy slave of a DLedger group: 10 or more)",
				"brokerName", c.BrokerName, "brokerId", c.BrokerID, "other", other)
		}
		return
	}
}
