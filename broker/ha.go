package broker

// Classic master/slave replication: package broker/replication runs it (its package comment
// describes the roles); this file wires it to the broker and adapts its requests.

import (
	"context"
	"net"
	"strconv"

	"rocketraft/broker/replication"
	"rocketraft/config"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// isClassicSlave: brokerRole=SLAVE outside DLedger mode.
func (b *Broker) isClassicSlave() bool { return b.place.haPart() == haSlave }

// newReplication builds the replication service for this node's part in classic HA (part, from
// the place decided in New; it is called once the metadata tables are open, before the store:
// the store's dispatch callback notifies it).
func (b *Broker) newReplication(part haPart) *replication.Service {
	role := replication.Master
	switch {
	case part == haWhileLeader:
		role = replication.GroupMember
	case part == haSlave:
		role = replication.Slave
	case b.cfg.BrokerRole == config.RoleSyncMaster:
		role = replication.SyncMaster
	}
	peers := b.peerPolicy() // peerlinks.go
	// The name-server client is made later in New; the lookup reads it when called (membership.go).
	routes := func(ctx context.Context, ns string) (map[int64]string, error) {
		return routeBrokerAddrs(ctx, b.nsClient, b.cfg.BrokerName, ns)
	}
	return replication.New(replication.Config{
		Role:             role,
		Broker:           b.cfg,
		ListenAddr:       net.JoinHostPort(listenHost(b.cfg.BrokerIP2), strconv.Itoa(b.cfg.HAListenPort)),
		Acquire:          b.acquireStore,
		Keys:             peers.haKeys(),
		Credential:       peers.haCredential(),
		ClientTLS:        b.clientTLS,
		Topics:           b.topics,
		Groups:           b.groups,
		Offsets:          b.offsets,
		DelayOffsets:     b.delayOffsets,
		TriggerRegister:  b.reg.trigger,
		RouteBrokerAddrs: routes,
		SelfAddr:         func() string { return b.brokerAddr },
		Logger:           b.logger.Named("ha"),
	})
}

// waitReplicas is SYNC_MASTER's replication wait after a successful local append (see
// replication.Service.WaitReplicas); WAIT=false sends (waitStore, from the send plan) and the
// other roles return SUCCESS.
func (b *Broker) waitReplicas(waitStore bool, results []storage.AppendResult) (int32, string) {
	if !b.repl.WaitsForSlaves() || len(results) == 0 || !waitStore {
		return remoting.Success, ""
	}
	last := results[len(results)-1]
	return b.repl.WaitReplicas(last.PhysicalOffset + int64(last.Size))
}

func (b *Broker) handleHAStatus(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return jsonResponse(req, b.repl.Status())
}

// addHARuntimeInfo adds brokerId and the replication keys to GET_BROKER_RUNTIME_INFO.
func (b *Broker) addHARuntimeInfo(table map[string]string) {
	table["brokerId"] = strconv.FormatInt(b.brokerID(), 10)
	b.repl.AddRuntimeInfo(table)
}
