// Package proxy is the stateless front of a rocketraft cluster for RocketMQ 5 clients: it serves
// the gRPC MessagingService (rmqpb) and talks RocketMQ remoting to the brokers it finds through
// the name servers, always to a group's current leader, so clients stay connected to the proxy
// while groups fail over behind it.
//
// What it serves so far: QueryRoute (every queue of the topic's groups, reachable at the
// proxy's own address), Heartbeat, Telemetry (settings answered, the stream kept open for the
// client's life), SendMessage of NORMAL and DELAY messages (SEND_MESSAGE_V2 to the group's
// master, a DELAY message's delivery time as the brokers' TIMER_DELIVER_MS; a send
// that failed before it could reach a broker is retried once after a fresh route; one whose
// outcome is unknown is reported as a failure, never as a success), and POP-based consumption:
// ReceiveMessage (POP of all the group's queues, long-polled within the call's deadline, TAG
// filters), AckMessage and ChangeInvisibleDuration (consume.go). NotifyClientTermination is
// answered OK; the other RPCs answer an in-band NOT_IMPLEMENTED (notyet.go). It keeps no durable
// state.
//
// Operations (docs/proxy.md): the keys of rmq-proxy.json (config.go); ACL on the clients'
// authorization header (auth.go), metrics (metrics.go) and a graceful stop that ends streams
// with OK, all applied around the RPCs by interceptors (interceptors.go); a log line per client
// connection (stats.go); the proxy inside a broker, mqbroker --enable-proxy (local.go).
package proxy
