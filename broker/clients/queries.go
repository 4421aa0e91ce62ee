package clients

import (
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// ConsumerIDs returns the client ids of group's members, sorted (GET_CONSUMER_LIST_BY_GROUP).
func (m *Manager) ConsumerIDs(group string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.consumers[group]
	if g == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(g.members))
}

// Subscription returns group's subscription to topic from the last heartbeat. The result is
// shared and must not be modified.
func (m *Manager) Subscription(group, topic string) (*Subscription, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.consumers[group]
	if g == nil {
		return nil, false
	}
	s, ok := g.subs[topic]
	return s, ok
}

// ConsumerGroupInfo describes one consumer group for GET_CONSUMER_CONNECTION_LIST.
type ConsumerGroupInfo struct {
	Group            string
	ConsumeType      string
	MessageModel     string
	ConsumeFromWhere string
	// Connections lists the members, sorted by client id.
	Connections []protocol.Connection
	// Subscriptions is keyed by topic; codes are the recomputed ones.
	Subscriptions map[string]protocol.SubscriptionData
	LastUpdate    time.Time
}

// ConsumerConnection renders the info as the GET_CONSUMER_CONNECTION_LIST body.
func (i *ConsumerGroupInfo) ConsumerConnection() protocol.ConsumerConnection {
	return protocol.ConsumerConnection{
		ConnectionSet:     i.Connections,
		ConsumeFromWhere:  i.ConsumeFromWhere,
		ConsumeType:       i.ConsumeType,
		MessageModel:      i.MessageModel,
		SubscriptionTable: i.Subscriptions,
	}
}

// ConsumerGroup returns a snapshot of group, or false if it has no members.
func (m *Manager) ConsumerGroup(group string) (*ConsumerGroupInfo, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.consumers[group]
	if g == nil {
		return nil, false
	}
	info := &ConsumerGroupInfo{
		Group:            group,
		ConsumeType:      g.consumeType,
		MessageModel:     g.messageModel,
		ConsumeFromWhere: g.consumeFromWhere,
		Connections:      connections(g.members),
		Subscriptions:    make(map[string]protocol.SubscriptionData, len(g.subs)),
		LastUpdate:       g.lastUpdate,
	}
	for t, s := range g.subs {
		info.Subscriptions[t] = s.data()
	}
	return info, true
}

func connections(members map[string]*member) []protocol.Connection {
	out := make([]protocol.Connection, 0, len(members))
	for _, id := range slices.Sorted(maps.Keys(members)) {
		out = append(out, members[id].connection())
	}
	return out
}

// ProducerConnections lists the members of a producer group, sorted by client id.
func (m *Manager) ProducerConnections(group string) []protocol.Connection {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p := m.producers[group]
	if p == nil {
		return nil
	}
	return connections(p.members)
}

// ProducerConn returns the connection of a random live member of a producer group, or nil (for
// CHECK_TRANSACTION_STATE).
func (m *Manager) ProducerConn(group string) *remoting.Conn {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p := m.producers[group]
	if p == nil {
		return nil
	}
	live := make([]*remoting.Conn, 0, len(p.members))
	for _, mb := range p.members {
		select {
		case <-mb.conn.Done():
		default:
			live = append(live, mb.conn)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[rand.IntN(len(live))]
}

// ProducerGroups returns the names of producer groups with members, sorted.
func (m *Manager) ProducerGroups() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Sorted(maps.Keys(m.producers))
}

// ConsumerGroups returns the names of consumer groups with members, sorted.
func (m *Manager) ConsumerGroups() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Sorted(maps.Keys(m.consumers))
}

// TopicsConsumedBy returns the topics group subscribes to, sorted.
func (m *Manager) TopicsConsumedBy(group string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.consumers[group]
	if g == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(g.subs))
}

// GroupsConsuming returns the consumer groups subscribed to topic, sorted.
func (m *Manager) GroupsConsuming(topic string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []string
	for name, g := range m.consumers {
		if _, ok := g.subs[topic]; ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// ConsumerMember is one live member of a consumer group with its connection, for requests the
// broker sends to consumers (RESET_CONSUMER_CLIENT_OFFSET).
type ConsumerMember struct {
	ClientID string
	Language string
	Version  int32
	Conn     *remoting.Conn
}

// ConsumerMembers lists group's members, sorted by client id.
func (m *Manager) ConsumerMembers(group string) []ConsumerMember {
	m.mu.RLock()
	defer m.mu.RUnlock()
	g := m.consumers[group]
	if g == nil {
		return nil
	}
	out := make([]ConsumerMember, 0, len(g.members))
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		mb := g.members[id]
		out = append(out, ConsumerMember{ClientID: id, Language: mb.language, Version: mb.version, Conn: mb.conn})
	}
	return out
}
