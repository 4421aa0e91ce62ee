package clients

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// Defaults for Config.
const (
	// DefaultChannelExpiry is Java's channelExpiredTimeout.
	DefaultChannelExpiry = 120 * time.Second
	// DefaultLockExpiry is Java's rocketmq.broker.rebalance.lockMaxLiveTime.
	DefaultLockExpiry = 60 * time.Second
)

// Config configures a Manager. Zero values take the defaults.
type Config struct {
	// ChannelExpiry drops members not refreshed for this long (ScanExpired); 0 means 120 s.
	ChannelExpiry time.Duration
	// LockExpiry is how long a queue lock survives without being re-taken; 0 means 60 s.
	LockExpiry time.Duration
	// Logger receives membership changes; nil discards them.
	Logger hclog.Logger
	// Notify sends NOTIFY_CONSUMER_IDS_CHANGED for group to one member's connection. nil sends
	// it with conn.InvokeOneway.
	Notify func(conn *remoting.Conn, group string)
	// NotifyEnabled reports the group's notifyConsumerIdsChangedEnable; nil means always. It is
	// called with the manager's lock held, so it must not call back into the Manager.
	NotifyEnabled func(group string) bool
}

// member is one client id's registration in a group.
type member struct {
	conn       *remoting.Conn
	clientID   string
	language   string
	version    int32
	lastUpdate time.Time
}

func (m *member) connection() protocol.Connection {
	return protocol.Connection{ClientAddr: m.conn.RemoteAddr(), ClientID: m.clientID, Language: m.language, Version: m.version}
}

type consumerGroup struct {
	consumeType, messageModel, consumeFromWhere string
	members                                     map[string]*member // by client id
	subs                                        map[string]*Subscription
	lastUpdate                                  time.Time
}

type producerGroup struct {
	members map[string]*member
}

// Manager is the broker's table of connected producers and consumers and of queue locks. It is
// safe for concurrent use.
type Manager struct {
	cfg Config

	mu        sync.RWMutex
	consumers map[string]*consumerGroup
	producers map[string]*producerGroup

	lockMu sync.Mutex
	locks  map[string]map[protocol.MessageQueue]*lockEntry
}

// NewManager returns an empty manager.
func NewManager(cfg Config) *Manager {
	if cfg.ChannelExpiry <= 0 {
		cfg.ChannelExpiry = DefaultChannelExpiry
	}
	if cfg.LockExpiry <= 0 {
		cfg.LockExpiry = DefaultLockExpiry
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Manager{
		cfg:       cfg,
		consumers: map[string]*consumerGroup{},
		producers: map[string]*producerGroup{},
		locks:     map[string]map[protocol.MessageQueue]*lockEntry{},
	}
}

// notice is one NOTIFY_CONSUMER_IDS_CHANGED to send once the lock is released.
type notice struct {
	conn  *remoting.Conn
	group string
}

// Heartbeat records conn for each producer and consumer group in hb under hb.ClientID (language,
// version, lastUpdate = now), updates each consumer group's subscriptions from hb, and notifies
// every member of a consumer group whose member set or subscribed topics changed. It returns the
// consumer groups in hb, for the broker to auto-create subscription groups and %RETRY% topics.
func (m *Manager) Heartbeat(conn *remoting.Conn, hb *protocol.HeartbeatData, language string, version int32, now time.Time) []string {
	if hb == nil || hb.ClientID == "" {
		return nil
	}
	var notices []notice
	groups := make([]string, 0, len(hb.ConsumerDataSet))
	m.mu.Lock()
	for i := range hb.ConsumerDataSet {
		cd := &hb.ConsumerDataSet[i]
		if cd.GroupName == "" {
			continue
		}
		groups = append(groups, cd.GroupName)
		g := m.consumers[cd.GroupName]
		if g == nil {
			g = &consumerGroup{members: map[string]*member{}, subs: map[string]*Subscription{}}
			m.consumers[cd.GroupName] = g
		}
		g.consumeType, g.messageModel, g.consumeFromWhere = cd.ConsumeType, cd.MessageModel, cd.ConsumeFromWhere
		g.lastUpdate = now
		joined := upsertMember(g.members, conn, hb.ClientID, language, version, now)
		if joined {
			m.cfg.Logger.Info("consumer joined group", "group", cd.GroupName, "client_id", hb.ClientID, "remote", conn.RemoteAddr())
		}
		subsChanged := !hb.WithoutSub && g.updateSubscriptions(cd.SubscriptionDataSet)
		if joined || subsChanged {
			notices = m.appendNotices(notices, cd.GroupName, g)
		}
	}
	for _, pd := range hb.ProducerDataSet {
		if pd.GroupName == "" {
			continue
		}
		p := m.producers[pd.GroupName]
		if p == nil {
			p = &producerGroup{members: map[string]*member{}}
			m.producers[pd.GroupName] = p
		}
		upsertMember(p.members, conn, hb.ClientID, language, version, now)
	}
	m.mu.Unlock()
	m.send(notices)
	return groups
}

// upsertMember refreshes or adds clientID; it reports whether the client is new to the group.
func upsertMember(members map[string]*member, conn *remoting.Conn, clientID, language string, version int32, now time.Time) bool {
	mb, ok := members[clientID]
	if !ok {
		mb = &member{clientID: clientID}
		members[clientID] = mb
	}
	mb.conn, mb.language, mb.version, mb.lastUpdate = conn, language, version, now
	return !ok
}

// updateSubscriptions applies Java's ConsumerGroupInfo.updateSubscription: new topics are added,
// an existing topic's subscription is replaced only by a newer subVersion, topics absent from
// data are removed. It reports whether the set of topics changed.
func (g *consumerGroup) updateSubscriptions(data []protocol.SubscriptionData) bool {
	changed := false
	seen := make(map[string]bool, len(data))
	for i := range data {
		d := &data[i]
		seen[d.Topic] = true
		old, ok := g.subs[d.Topic]
		if !ok {
			g.subs[d.Topic] = fromData(d)
			changed = true
		} else if d.SubVersion > old.SubVersion {
			g.subs[d.Topic] = fromData(d)
		}
	}
	for topic := range g.subs {
		if !seen[topic] {
			delete(g.subs, topic)
			changed = true
		}
	}
	return changed
}

// appendNotices queues one notice per member of g, if the group wants notifications.
func (m *Manager) appendNotices(out []notice, group string, g *consumerGroup) []notice {
	if m.cfg.NotifyEnabled != nil && !m.cfg.NotifyEnabled(group) {
		return out
	}
	for _, mb := range g.members {
		out = append(out, notice{conn: mb.conn, group: group})
	}
	return out
}

// send delivers notices; it must be called without m.mu held.
func (m *Manager) send(notices []notice) {
	for _, n := range notices {
		if m.cfg.Notify != nil {
			m.cfg.Notify(n.conn, n.group)
			continue
		}
		req := remoting.NewRequest(remoting.NotifyConsumerIDsChanged, map[string]string{"consumerGroup": n.group}, nil)
		if err := n.conn.InvokeOneway(req); err != nil {
			m.cfg.Logger.Debug("cannot notify consumer", "group", n.group, "remote", n.conn.RemoteAddr(), "error", err)
		}
	}
}

// Unregister removes clientID's registration on conn from producerGroup and/or consumerGroup
// (UNREGISTER_CLIENT; empty names are skipped). Removing a consumer notifies the remaining
// members. A registration that has since moved to another connection is left alone.
func (m *Manager) Unregister(conn *remoting.Conn, clientID, producerGroup, consumerGroup string) {
	var notices []notice
	m.mu.Lock()
	if p := m.producers[producerGroup]; p != nil && producerGroup != "" {
		if mb, ok := p.members[clientID]; ok && sameConn(mb.conn, conn) {
			delete(p.members, clientID)
			m.cfg.Logger.Info("producer unregistered", "group", producerGroup, "client_id", clientID)
			if len(p.members) == 0 {
				delete(m.producers, producerGroup)
			}
		}
	}
	if g := m.consumers[consumerGroup]; g != nil && consumerGroup != "" {
		if mb, ok := g.members[clientID]; ok && sameConn(mb.conn, conn) {
			delete(g.members, clientID)
			m.cfg.Logger.Info("consumer unregistered", "group", consumerGroup, "client_id", clientID)
			notices = m.leftLocked(notices, consumerGroup, g)
		}
	}
	m.mu.Unlock()
	m.send(notices)
}

// leftLocked handles a consumer group that lost members: drop it if empty, else notify the rest.
func (m *Manager) leftLocked(notices []notice, group string, g *consumerGroup) []notice {
	if len(g.members) == 0 {
		delete(m.consumers, group)
		m.cfg.Logger.Info("consumer group has no members left", "group", group)
		return notices
	}
	return m.appendNotices(notices, group, g)
}

// ConnClosed drops every registration made over conn and notifies the remaining members of each
// consumer group that lost one. Wire it to remoting.Server.OnDisconnect.
func (m *Manager) ConnClosed(conn *remoting.Conn) {
	m.removeWhere(func(mb *member) bool { return sameConn(mb.conn, conn) }, "connection closed")
}

// ScanExpired drops registrations not refreshed within ChannelExpiry of now and notifies the
// remaining members of affected consumer groups. The broker runs it every 10 s. Connections are
// not closed here.
func (m *Manager) ScanExpired(now time.Time) {
	m.removeWhere(func(mb *member) bool { return now.Sub(mb.lastUpdate) > m.cfg.ChannelExpiry }, "heartbeat expired")
}

func (m *Manager) removeWhere(drop func(*member) bool, why string) {
	var notices []notice
	m.mu.Lock()
	for name, p := range m.producers {
		for id, mb := range p.members {
			if drop(mb) {
				delete(p.members, id)
				m.cfg.Logger.Info("producer removed", "group", name, "client_id", id, "reason", why)
			}
		}
		if len(p.members) == 0 {
			delete(m.producers, name)
		}
	}
	for name, g := range m.consumers {
		removed := false
		for id, mb := range g.members {
			if drop(mb) {
				delete(g.members, id)
				removed = true
				m.cfg.Logger.Info("consumer removed", "group", name, "client_id", id, "reason", why)
			}
		}
		if removed {
			notices = m.leftLocked(notices, name, g)
		}
	}
	m.mu.Unlock()
	m.send(notices)
}

func sameConn(a, b *remoting.Conn) bool {
	return a == b || (a != nil && b != nil && a.ID() == b.ID())
}
