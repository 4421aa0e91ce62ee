package namesrv

import (
	"maps"
	"slices"

	"rocketraft/protocol"
)

// Read side of the route table: routes, cluster info, topic lists, and the admin operations on
// queue data (perm changes, topic deletion, topic registration).

// Route builds the route of topic: every broker name's queue data, and the group data of those
// groups that still have members. ok is false when the topic has no queue data or none of its
// groups is known (the caller answers TOPIC_NOT_EXIST). The result is a deep copy, sorted.
//
// Unless registeredOnly, a group that has no master but has live members registered with
// forwardsWrites (DLedger followers) gets a stand-in master: the lowest-id such member is also
// published as brokerId 0. Stock clients drop a group without a master from their send routes
// and refresh routes only every 30 s, so a client refreshing in the second between a dead
// leader's deregistration and its successor's registration would fail every send for up to
// 30 s; with the stand-in its sends reach a follower, which forwards them to the new leader (or
// answers SERVICE_NOT_AVAILABLE while there is none, which the client retries). Cluster info and
// registration answers always show the registrations as they are.
func (t *RouteTable) Route(topic string, registeredOnly bool) (route *protocol.TopicRouteData, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	qds := t.topicQueueTable[topic]
	if len(qds) == 0 {
		return nil, false
	}
	route = &protocol.TopicRouteData{FilterServerTable: map[string][]string{}}
	for name, qd := range qds {
		c := *qd
		route.QueueDatas = append(route.QueueDatas, &c)
		bd := t.brokerAddrTable[name]
		if bd == nil {
			continue
		}
		clone := bd.Clone()
		if !registeredOnly {
			t.standInMasterLocked(clone)
		}
		route.BrokerDatas = append(route.BrokerDatas, clone)
		if len(t.filterServerTable) == 0 {
			continue
		}
		for _, addr := range clone.BrokerAddrs {
			if fs, ok := t.filterServerTable[brokerKey{clone.Cluster, addr}]; ok {
				route.FilterServerTable[addr] = slices.Clone(fs)
			}
		}
	}
	if len(route.BrokerDatas) == 0 {
		return nil, false
	}
	route.Sort()
	return route, true
}

// standInMasterLocked publishes the lowest-id live write-forwarding member of bd (a copy) as its
// master when it has none (see Route).
func (t *RouteTable) standInMasterLocked(bd *protocol.BrokerData) {
	if _, ok := bd.BrokerAddrs[protocol.MasterID]; ok {
		return
	}
	best, found := int64(0), false
	for id, addr := range bd.BrokerAddrs {
		live := t.brokerLiveTable[brokerKey{bd.Cluster, addr}]
		if live != nil && live.forwardsWrites && (!found || id < best) {
			best, found = id, true
		}
	}
	if found {
		bd.BrokerAddrs[protocol.MasterID] = bd.BrokerAddrs[best]
	}
}

// ClusterInfo returns a deep copy of the group and cluster tables (GET_BROKER_CLUSTER_INFO).
func (t *RouteTable) ClusterInfo() *protocol.ClusterInfo {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ci := &protocol.ClusterInfo{
		BrokerAddrTable:  make(map[string]*protocol.BrokerData, len(t.brokerAddrTable)),
		ClusterAddrTable: make(map[string][]string, len(t.clusterAddrTable)),
	}
	for name, bd := range t.brokerAddrTable {
		ci.BrokerAddrTable[name] = bd.Clone()
	}
	for cluster, names := range t.clusterAddrTable {
		ci.ClusterAddrTable[cluster] = slices.Sorted(maps.Keys(names))
	}
	return ci
}

// Topics returns every topic with queue data, sorted.
func (t *RouteTable) Topics() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return slices.Sorted(maps.Keys(t.topicQueueTable))
}

// TopicsByCluster returns the topics hosted by at least one broker name of cluster, sorted.
func (t *RouteTable) TopicsByCluster(cluster string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	names := t.clusterAddrTable[cluster]
	var out []string
	for topic, qds := range t.topicQueueTable {
		for name := range qds {
			if _, ok := names[name]; ok {
				out = append(out, topic)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// SystemTopics returns the names usable as topics that route to a broker by construction (every
// cluster name and broker name, §10.5) and one known broker address (GET_SYSTEM_TOPIC_LIST_FROM_NS).
func (t *RouteTable) SystemTopics() *protocol.TopicList {
	t.mu.RLock()
	defer t.mu.RUnlock()
	tl := &protocol.TopicList{TopicList: []string{}}
	for _, cluster := range slices.Sorted(maps.Keys(t.clusterAddrTable)) {
		tl.TopicList = append(tl.TopicList, cluster)
		for _, name := range slices.Sorted(maps.Keys(t.clusterAddrTable[cluster])) {
			tl.TopicList = append(tl.TopicList, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(t.brokerAddrTable)) {
		addrs := t.brokerAddrTable[name].BrokerAddrs
		if len(addrs) > 0 {
			tl.BrokerAddr = addrs[slices.Min(slices.Collect(maps.Keys(addrs)))]
			break
		}
	}
	return tl
}

// WipeWritePerm clears the write bit of every queue data of brokerName and returns how many
// topics it touched (WIPE_WRITE_PERM_OF_BROKER, graceful drain).
func (t *RouteTable) WipeWritePerm(brokerName string) int {
	return t.changePerm(brokerName, func(p int32) int32 { return p &^ protocol.PermWrite })
}

// AddWritePerm sets the perm of every queue data of brokerName to read|write, as Java does, and
// returns how many topics it touched (ADD_WRITE_PERM_OF_BROKER).
func (t *RouteTable) AddWritePerm(brokerName string) int {
	return t.changePerm(brokerName, func(int32) int32 { return protocol.PermReadWrite })
}

func (t *RouteTable) changePerm(brokerName string, f func(int32) int32) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, qds := range t.topicQueueTable {
		if qd := qds[brokerName]; qd != nil {
			qd.Perm = f(qd.Perm)
			n++
		}
	}
	return n
}

// DeleteTopic removes a topic's queue data: all of it when cluster is "", otherwise only that of
// the cluster's broker names (DELETE_TOPIC_IN_NAMESRV).
func (t *RouteTable) DeleteTopic(topic, cluster string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cluster == "" {
		delete(t.topicQueueTable, topic)
		return
	}
	qds := t.topicQueueTable[topic]
	if qds == nil {
		return
	}
	for name := range t.clusterAddrTable[cluster] {
		delete(qds, name)
	}
	if len(qds) == 0 {
		delete(t.topicQueueTable, topic)
	}
}

// RegisterTopic merges queue data from a route body into a topic (REGISTER_TOPIC_IN_NAMESRV).
// Every queue data must name a known broker group, otherwise nothing changes and false is
// returned.
func (t *RouteTable) RegisterTopic(topic string, qds []*protocol.QueueData) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(qds) == 0 {
		return false
	}
	for _, qd := range qds {
		if qd == nil || t.brokerAddrTable[qd.BrokerName] == nil {
			return false
		}
	}
	for _, qd := range qds {
		c := *qd
		t.putQueueDataLocked(topic, &c)
	}
	return true
}
