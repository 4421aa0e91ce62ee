package replication

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/internal/storetest"
	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// node is one side of a replication pair: a store, the metadata tables and a Service.
type node struct {
	st        *storage.Store
	cfg       *config.Broker
	topics    *meta.Topics
	groups    *meta.Groups
	offsets   *meta.Offsets
	delays    *meta.DelayOffsets
	s         *Service
	registers atomic.Int32
	routes    map[int64]string
	log       *errorLog
}

// errorLog is a logger that also keeps the messages of its Error calls.
type errorLog struct {
	hclog.Logger
	mu   sync.Mutex
	msgs []string
}

func (l *errorLog) Error(msg string, args ...any) {
	l.mu.Lock()
	l.msgs = append(l.msgs, msg)
	l.mu.Unlock()
}

// logged reports whether an Error message contained sub.
func (l *errorLog) logged(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if strings.Contains(m, sub) {
			return true
		}
	}
	return false
}

func newNode(t *testing.T, role Role, tune func(*config.Broker)) *node {
	t.Helper()
	cfg := config.NewBroker()
	cfg.BrokerIP2 = "127.0.0.1"
	cfg.HAListenPort = 0
	cfg.MappedFileSizeCommitLog = 1 << 20
	cfg.HASendHeartbeatInterval = 100
	cfg.SyncFlushTimeout = 2000
	cfg.NamesrvAddr = "127.0.0.1:9876"
	if tune != nil {
		tune(cfg)
	}
	n := &node{st: storetest.Open(t), cfg: cfg, log: &errorLog{Logger: hclog.NewNullLogger()}}
	dir := t.TempDir()
	var err error
	if n.topics, err = meta.OpenTopics(filepath.Join(dir, "topics.json"), nil); err != nil {
		t.Fatal(err)
	}
	if n.groups, err = meta.OpenGroups(filepath.Join(dir, "groups.json"), nil); err != nil {
		t.Fatal(err)
	}
	if n.offsets, err = meta.OpenOffsets(filepath.Join(dir, "offsets.json"), nil); err != nil {
		t.Fatal(err)
	}
	if n.delays, err = meta.OpenDelayOffsets(filepath.Join(dir, "delay.json"), nil); err != nil {
		t.Fatal(err)
	}
	n.s = New(Config{
		Role: role, Broker: cfg, ListenAddr: "127.0.0.1:0",
		Acquire: storetest.Acquire(n.st),
		Topics:  n.topics, Groups: n.groups, Offsets: n.offsets, DelayOffsets: n.delays,
		TriggerRegister: func() { n.registers.Add(1) },
		RouteBrokerAddrs: func(context.Context, string) (map[int64]string, error) {
			return n.routes, nil
		},
		SelfAddr: func() string { return "127.0.0.1:10911" },
		Logger:   n.log,
	})
	t.Cleanup(n.s.Stop)
	return n
}

func (n *node) put(t *testing.T, body string) storage.AppendResult {
	t.Helper()
	res := storetest.Put(t, n.st, &message.Message{Topic: "T", Body: []byte(body)})
	n.s.Notify()
	return res
}

// startSlave starts a classic slave (brokerId 1) following m's advertised HA address.
func startSlave(t *testing.T, m *node) *node {
	t.Helper()
	sl := newNode(t, Slave, func(c *config.Broker) {
		c.HAMasterAddress = m.s.AdvertisedAddr()
		c.BrokerRole = config.RoleSlave
		c.BrokerID = 1
	})
	if err := sl.s.Start(); err != nil {
		t.Fatal(err)
	}
	return sl
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s", what)
		}
	}
}

// TestMasterAndSlave: a slave following the master's advertised address stores its commitlog
// byte for byte, and both report it (GET_BROKER_HA_STATUS, runtime info).
func TestMasterAndSlave(t *testing.T) {
	m := newNode(t, Master, nil)
	if err := m.s.Start(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.s.AdvertisedAddr(), "127.0.0.1:") || strings.HasSuffix(m.s.AdvertisedAddr(), ":0") {
		t.Fatalf("advertised %q", m.s.AdvertisedAddr())
	}
	m.put(t, "one")
	sl := startSlave(t, m)
	m.put(t, "two")
	waitFor(t, "replication", func() bool { return sl.st.CommitLogMaxOffset() == m.st.CommitLogMaxOffset() })
	got := storetest.Read(t, sl.st, "T", 0)
	if len(got) != 2 || string(got[1].Body) != "two" {
		t.Fatalf("slave holds %d records", len(got))
	}
	waitFor(t, "an in-sync slave", func() bool { return m.s.Status().InSyncSlaveNums == 1 })
	ms := m.s.Status()
	if !ms.Master || len(ms.HAConnectionInfo) != 1 || ms.MasterCommitLogMaxOffset != m.st.CommitLogMaxOffset() {
		t.Fatalf("master status %+v", ms)
	}
	ss := sl.s.Status()
	if ss.Master || !ss.HAClientRuntimeInfo.IsActivated || ss.HAClientRuntimeInfo.MaxOffset != sl.st.CommitLogMaxOffset() {
		t.Fatalf("slave status %+v", ss)
	}
	mt, st := map[string]string{}, map[string]string{}
	m.s.AddRuntimeInfo(mt)
	sl.s.AddRuntimeInfo(st)
	if mt["haConnections"] != "1" || mt["haInSyncSlaves"] != "1" || mt["haServerAddr"] != m.s.AdvertisedAddr() {
		t.Fatalf("master runtime info %v", mt)
	}
	if st["masterHaAddr"] != m.s.AdvertisedAddr() || st["haConnected"] != "true" || st["slaveFallBehind"] != "0" {
		t.Fatalf("slave runtime info %v", st)
	}
	if m.s.WaitsForSlaves() || sl.s.WaitsForSlaves() {
		t.Fatal("only a SYNC_MASTER waits for slaves")
	}
	if code, _ := m.s.WaitReplicas(m.st.CommitLogMaxOffset()); code != remoting.Success {
		t.Fatalf("ASYNC_MASTER WaitReplicas: %d", code)
	}
}

// TestSyncMasterWaits: a SYNC_MASTER without a slave answers SLAVE_NOT_AVAILABLE at once; with
// one in sync it answers SUCCESS once the slave stored the records.
func TestSyncMasterWaits(t *testing.T) {
	m := newNode(t, SyncMaster, func(c *config.Broker) { c.BrokerRole = config.RoleSyncMaster })
	if err := m.s.Start(); err != nil {
		t.Fatal(err)
	}
	res := m.put(t, "alone")
	if code, _ := m.s.WaitReplicas(res.PhysicalOffset + int64(res.Size)); code != remoting.SlaveNotAvailable {
		t.Fatalf("no slave: %d", code)
	}
	startSlave(t, m)
	waitFor(t, "an in-sync slave", func() bool { return m.s.Status().InSyncSlaveNums == 1 })
	res = m.put(t, "replicated")
	if code, remark := m.s.WaitReplicas(res.PhysicalOffset + int64(res.Size)); code != remoting.Success {
		t.Fatalf("with a slave: %d %s", code, remark)
	}
	if !m.s.WaitsForSlaves() {
		t.Fatal("a SYNC_MASTER waits for slaves")
	}
}

// TestGroupMemberServesWhileLeader: a DLedger member serves legacy slaves only while it leads;
// RoleChanged does nothing on a classic master, and nothing starts after Stop.
func TestGroupMemberServesWhileLeader(t *testing.T) {
	g := newNode(t, GroupMember, nil)
	if err := g.s.Start(); err != nil || g.s.server.Load() != nil {
		t.Fatalf("a member serves nothing before it leads (%v)", err)
	}
	if st := g.s.Status(); st.Master {
		t.Fatal("a follower reports master")
	}
	g.s.RoleChanged(true)
	if g.s.server.Load() == nil || !g.s.Status().Master {
		t.Fatal("the leader does not serve")
	}
	g.s.RoleChanged(false)
	if g.s.server.Load() != nil {
		t.Fatal("a follower still serves")
	}
	g.s.Stop()
	g.s.RoleChanged(true)
	if g.s.server.Load() != nil {
		t.Fatal("a server started after Stop")
	}
	m := newNode(t, Master, nil)
	m.s.RoleChanged(false) // classic: not a leadership matter
	if m.s.server.Load() != nil {
		t.Fatal("RoleChanged started a classic server")
	}
	if st := m.s.Status(); !st.Master {
		t.Fatal("a classic master whose server is not running still reports master")
	}
}

// master is a remoting server answering the four GET_ALL_* codes from fixed tables.
func fakeMaster(t *testing.T, topics protocol.TopicConfigSerializeWrapper, offsets protocol.ConsumerOffsetSerializeWrapper,
	delays meta.DelayOffsetWrapper, groups protocol.SubscriptionGroupWrapper) string {
	t.Helper()
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"})
	answer := func(v any) remoting.Handler {
		return func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
			resp := req.NewResponse(remoting.Success, "")
			resp.Body = protocol.MustEncode(v)
			return resp
		}
	}
	srv.Handle(remoting.GetAllTopicConfig, answer(topics))
	srv.Handle(remoting.GetAllConsumerOffset, answer(offsets))
	srv.Handle(remoting.GetAllDelayOffset, answer(delays))
	srv.Handle(remoting.GetAllSubscriptionGroupConfig, answer(groups))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv.Addr()
}

// TestSlaveLearnsMasterAndCopiesMetadata: a REGISTER_BROKER answer names the master; the slave
// then copies its topics (and re-registers), offsets, delay progress and groups, and logs an
// error when another broker is registered under its brokerId.
func TestSlaveLearnsMasterAndCopiesMetadata(t *testing.T) {
	topics := protocol.TopicConfigSerializeWrapper{TopicConfigTable: map[string]*protocol.TopicConfig{
		"Orders": {TopicName: "Orders", ReadQueueNums: 4, WriteQueueNums: 4, Perm: protocol.PermRead | protocol.PermWrite}},
		DataVersion: protocol.DataVersion{Timestamp: 7, Counter: 3}}
	offsets := protocol.ConsumerOffsetSerializeWrapper{OffsetTable: map[string]map[int32]int64{"Orders@G1": {0: 42}}}
	delays := meta.DelayOffsetWrapper{OffsetTable: map[int32]int64{3: 9}}
	groups := protocol.SubscriptionGroupWrapper{SubscriptionGroupTable: map[string]*protocol.SubscriptionGroupConfig{
		"G1": {GroupName: "G1", ConsumeEnable: true}}, DataVersion: protocol.DataVersion{Timestamp: 8, Counter: 1}}
	addr := fakeMaster(t, topics, offsets, delays, groups)

	sl := newNode(t, Slave, func(c *config.Broker) { c.BrokerRole = config.RoleSlave; c.BrokerID = 1 })
	sl.routes = map[int64]string{0: addr, 1: "127.0.0.1:20911"}
	if err := sl.s.SyncFromMaster(); err != nil { // no master known yet: nothing to do
		t.Fatal(err)
	}
	if err := sl.s.Start(); err != nil {
		t.Fatal(err)
	}
	resp := remoting.NewRequest(remoting.RegisterBroker, nil, nil).NewResponse(remoting.Success, "")
	resp.ExtFields = (&protocol.RegisterBrokerResponseHeader{HaServerAddr: "127.0.0.1:1", MasterAddr: addr}).ToExt()
	sl.s.OnRegisterAnswer(resp)
	waitFor(t, "the metadata copy", func() bool {
		off, _ := sl.offsets.Query("G1", "Orders", 0)
		return sl.topics.Get("Orders") != nil && off == 42 && sl.delays.Get(3) == 9 && sl.groups.Get("G1") != nil
	})
	if sl.registers.Load() == 0 {
		t.Fatal("a new topic table was not announced")
	}
	if ha, ma := sl.s.masterAddrs(); ha != "127.0.0.1:1" || ma != addr {
		t.Fatalf("learned %q %q", ha, ma)
	}
	waitFor(t, "the brokerId warning", func() bool {
		return sl.log.logged("another broker is registered under this slave's brokerId")
	})
	// A master does not take a slave's answer.
	m := newNode(t, Master, nil)
	m.s.OnRegisterAnswer(resp)
	if ha, _ := m.s.masterAddrs(); ha != "" {
		t.Fatal("a master learned a master")
	}
}

// TestSyncFromMasterErrors: an unreachable master is an error naming it; undecodable tables are
// errors that leave the slave's tables alone; a master that does not serve a code (an older
// broker without GET_ALL_DELAY_OFFSET) is skipped for it without an error.
func TestSyncFromMasterErrors(t *testing.T) {
	sl := newNode(t, Slave, func(c *config.Broker) { c.BrokerRole = config.RoleSlave; c.BrokerID = 1 })
	sl.routes = map[int64]string{}
	if err := sl.s.Start(); err != nil {
		t.Fatal(err)
	}
	learn := func(addr string) {
		resp := remoting.NewRequest(remoting.RegisterBroker, nil, nil).NewResponse(remoting.Success, "")
		resp.ExtFields = (&protocol.RegisterBrokerResponseHeader{MasterAddr: addr}).ToExt()
		sl.s.OnRegisterAnswer(resp)
	}
	learn("127.0.0.1:1") // nothing listens there
	if err := sl.s.SyncFromMaster(); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("unreachable master: %v", err)
	}

	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"})
	garbage := func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		resp := req.NewResponse(remoting.Success, "")
		resp.Body = []byte("{not json")
		return resp
	}
	srv.Handle(remoting.GetAllTopicConfig, garbage)
	srv.Handle(remoting.GetAllConsumerOffset, garbage)
	srv.Handle(remoting.GetAllSubscriptionGroupConfig, garbage)
	srv.Handle(remoting.GetAllDelayOffset, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		return req.NewResponse(remoting.RequestCodeNotSupported, "no such code")
	})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	learn(srv.Addr())
	err := sl.s.SyncFromMaster()
	if err == nil {
		t.Fatal("undecodable tables: no error")
	}
	for _, want := range []string{"topic configs", "consumer offsets", "subscription groups"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "delay") {
		t.Errorf("an unserved GET_ALL_DELAY_OFFSET is an error: %v", err)
	}
	if len(sl.topics.Wrapper().TopicConfigTable) != 0 || len(sl.groups.Wrapper().SubscriptionGroupTable) != 0 {
		t.Fatal("the slave's tables changed")
	}
	// An answer without addresses keeps the learned ones.
	learn("")
	if _, addr := sl.s.masterAddrs(); addr != srv.Addr() {
		t.Fatalf("master address %q after an empty answer", addr)
	}
}

// TestSlaveRuntimeInfoBeforeConnecting: a slave that has not reached its master yet reports it
// unconnected, with the configured HA address and its own end.
func TestSlaveRuntimeInfoBeforeConnecting(t *testing.T) {
	sl := newNode(t, Slave, func(c *config.Broker) {
		c.BrokerRole, c.BrokerID = config.RoleSlave, 1
		c.HAMasterAddress = "127.0.0.1:1"
	})
	storetest.Put(t, sl.st, &message.Message{Topic: "T", Body: []byte("local")})
	if err := sl.s.Start(); err != nil {
		t.Fatal(err)
	}
	table := map[string]string{}
	sl.s.AddRuntimeInfo(table)
	if table["masterHaAddr"] != "127.0.0.1:1" || table["haConnected"] != "false" || table["haServerAddr"] != "" {
		t.Fatalf("runtime info %v", table)
	}
	st := sl.s.Status()
	if st.Master || st.HAClientRuntimeInfo.IsActivated {
		t.Fatalf("status %+v", st)
	}
	if sl.s.AdvertisedAddr() != "127.0.0.1:0" {
		t.Fatalf("a slave advertises %q, want brokerIP2 and haListenPort", sl.s.AdvertisedAddr())
	}
}
