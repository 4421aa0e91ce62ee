// Package proxy is the stateless front of a rocketraft cluster for RocketMQ 5 clients: it serves
// the gRPC MessagingService (rmqpb) and talks RocketMQ remoting to the brokers it finds through
// the name servers, always to a group's current leader, so clients stay connected to the proxy
// while groups fail over behind it. It keeps no durable state; any number of proxies can serve
// one cluster.
//
// Where each part lives:
//   - routes and leaders: QueryRoute answers every queue of the topic's groups at the proxy's own
//     address (messaging.go); routes.go caches routes, and the proxy re-learns a group's master
//     from forwarding answers and broken connections;
//   - producers: SendMessage of NORMAL, DELAY (delivery time as TIMER_DELIVER_MS), FIFO
//     (fifo.go: the message group picks one queue) and TRANSACTION messages (transaction.go:
//     half messages, EndTransaction at the group's current master, the brokers' check-backs
//     pushed to a producer over its Telemetry stream, clients.go, txnregister.go); a send that
//     stored nothing is retried once at the new master, one whose outcome is unknown is reported
//     as a failure, never as a success;
//   - consumers: ReceiveMessage over the brokers' POP of all the group's queues, orderly for
//     FIFO groups, AckMessage, ChangeInvisibleDuration (consume.go), QueryAssignment,
//     ForwardMessageToDeadLetterQueue (dlq.go), offsets and PullMessage for clients that keep
//     their own offsets; what the server decides in a client's Settings (settings.go) and the
//     topic and group configs it decides from (configs.go);
//   - operations (docs/proxy.md): the keys of rmq-proxy.json (config.go); ACL on the clients'
//     authorization header (auth.go), metrics (metrics.go) and a graceful stop that ends streams
//     with OK, all applied around the RPCs by interceptors (interceptors.go); a log line per
//     client connection (stats.go); the proxy inside a broker, mqbroker --enable-proxy
//     (local.go). RPCs with nothing to map onto answer an in-band NOT_IMPLEMENTED (notyet.go);
//   - RocketMQ 4.x clients: a second listener (remotingListenPort) speaks remoting, serving
//     routes that name the proxy as every group's master and passing each request on to the
//     group's current master (remoting4*.go).
package proxy
