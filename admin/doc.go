// Package admin implements mqadmin, the operator command-line tool, against RocketMQ-compatible
// name servers and brokers (ours or Java's): topic creation and deletion, routes, queue offsets,
// cluster and broker status, consumer progress and message lookup.
//
// # Shape
//
// A Tool holds one remoting client and the name server list. Every remote call is bounded by
// Config.Timeout (3 s by default) and goes through two helpers: callNamesrv asks the name servers
// in order and takes the first answer (a server that answers with an error code is an answer: the
// next one is not tried), and callMasters calls every master (broker id 0) of a cluster, as
// listed by GET_BROKER_CLUSTER_INFO. A non-SUCCESS response becomes a *ResponseError carrying the
// address, the response code and the remark.
//
// Each command lives in its own file: an exported method on Tool that does the remote work and
// returns typed rows (reusable by tests and other tools), and a command entry that parses the
// RocketMQ-style flags and prints the rows as an aligned table (default) or indented JSON (-o json).
// Main dispatches a command line to them; cmd/mqadmin only calls Main.
//
// # Commands and request codes
//
//	updateTopic       UPDATE_AND_CREATE_TOPIC (17) to one broker (-b) or every master of a cluster (-c);
//	                  with --order also PUT_KV_CONFIG (100) ORDER_TOPIC_CONFIG on every name server
//	deleteTopic       DELETE_TOPIC_IN_BROKER (215) to every member of the cluster, then
//	                  DELETE_TOPIC_IN_NAMESRV (216) to every name server
//	topicList         GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206); with -c GET_ROUTEINFO_BY_TOPIC (105)
//	                  and QUERY_TOPIC_CONSUME_BY_WHO (300) per topic
//	topicRoute        GET_ROUTEINFO_BY_TOPIC (105)
//	topicStatus       route, then GET_TOPIC_STATS_INFO (202) per master
//	clusterList       GET_BROKER_CLUSTER_INFO (106), then GET_BROKER_RUNTIME_INFO (28) per address
//	brokerStatus      GET_BROKER_RUNTIME_INFO (28)
//	consumerProgress  route of the topic (or of %RETRY%<group>), then GET_CONSUME_STATS (208) per master;
//	                  without -g every group with a retry topic, plus GET_CONSUMER_CONNECTION_LIST (203)
//	queryMsgByKey     route, then QUERY_MESSAGE (12) per master
//	queryMsgById      VIEW_MESSAGE_BY_ID (33) to the store host encoded in the offset message id
//	raftStatus        GET_BROKER_CLUSTER_INFO (106), then GET_RAFT_STATUS (32001, ours) per address
//	transferLeader    TRANSFER_RAFT_LEADER (32002, ours) to the group's master (a follower forwards)
//	addPeer           ADD_RAFT_PEER (32003, ours), likewise
//	removePeer        REMOVE_RAFT_PEER (32004, ours), likewise
//	haStatus          GET_BROKER_CLUSTER_INFO (106), then GET_BROKER_HA_STATUS (907) per address
//
// # Exit status
//
// 0 on success, 1 when a remote call or its result failed, 2 for a bad command line.
package admin
