// Package namesrv is the name server: the route registry brokers register with and clients ask
// where a topic lives.
//
// # What it keeps and why
//
// Everything except KV config is soft state rebuilt from broker registrations, which every broker
// repeats every 30 s to every name server; name servers never talk to each other. The RouteTable
// holds, as in Java's RouteInfoManager:
//
//	topicQueueTable    topic → brokerName → QueueData      (queue counts and perm per group)
//	brokerAddrTable    brokerName → BrokerData             (cluster, brokerId → address)
//	clusterAddrTable   cluster → {brokerName}
//	brokerLiveTable    (cluster, brokerAddr) → liveness    (last update, timeout, DataVersion,
//	                                                        registering connection, HA address)
//	filterServerTable  (cluster, brokerAddr) → [addr]      (legacy, usually empty)
//
// Queue data comes only from a group's master (brokerId 0), and is rebuilt only when the
// registering broker's DataVersion differs from the one it registered last (or the group or topic
// is new), so the 30 s re-registrations are cheap. A broker is removed when it unregisters, when
// its registering connection closes, or when it has not registered for its timeout (default
// 120 s, checked every ScanInterval). A group that loses its master keeps its queue data, so
// consumers can read from slaves while producers (who need brokerId 0) stop sending to it.
//
// KV config (namespace → key → value; ORDER_TOPIC_CONFIG feeds orderTopicConf) is the only
// persistent state, kept in KVStore.
//
// # Files
//
// routetable.go (register/unregister), expiry.go (timeout scan, connection loss), query.go (routes,
// cluster info, topic lists, perm changes), kvconfig.go, server.go (Config, Server, handler table)
// and one handle_*.go file per request family.
//
// # Locking
//
// RouteTable.mu (a sync.RWMutex) guards all five route tables; every RouteTable method takes it
// exactly once and calls no other locking code while holding it. KVStore.mu guards the KV table
// and the file write. The two locks are never held at the same time: handlers that need both
// (GET_ROUTEINFO_BY_TOPIC with orderMessageEnable, REGISTER_BROKER's order-topic reply) call the
// route table and the KV store one after the other. The remoting layer's own locks are never held
// while a handler runs, so there is no ordering with them either.
package namesrv
