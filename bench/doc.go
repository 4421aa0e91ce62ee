// Package bench implements mqbench, a load generator that measures a
// RocketMQ-compatible broker through the official Go client
// (github.com/apache/rocketmq-client-go/v2), unmodified, so that the
// numbers are the ones an application using that client would see, or
// through a light native client that shows what the broker itself can do.
//
// # Producer benchmark (RunProduce)
//
// Messages with a random (incompressible) body of a fixed size are sent to
// one topic. In sync and oneway modes, Concurrency goroutines each loop on
// SendSync / SendOneWay; in async mode one dispatcher per producer keeps
// Concurrency SendAsync calls in flight, bounded by a semaphore that the
// completion callback releases. With Batch > 1 every call carries that many
// messages as one client batch (a single SEND_BATCH_MESSAGE request). The
// load is spread over Producers producer instances, each with its own client
// instance and thus its own TCP connection to each broker.
//
// A send's latency is the wall time of one call: from before SendSync or
// SendAsync to its return or callback. For oneway it is only the time to
// hand the request to the socket. A failed send is counted as an error and
// its goroutine pauses briefly (10ms) so that a dead broker does not cause a
// busy loop.
//
// # Consumer benchmark (RunConsume)
//
// A clustering consumer of one group counts what it receives: either a
// PushConsumer whose callback gets up to ConsumeBatch messages, or a
// PullConsumer drained by Poll and ACK. The callback does no more than take
// the time once, record one end-to-end latency sample per message (receive
// time minus the message's born timestamp, set by the producer's client
// with millisecond resolution: producer and consumer clocks must agree) and
// add to counters. Consumption starts at the first or last offset for a new
// group, and ends after Duration or once Expect messages were received.
//
// # Native client (Client = ClientNative)
//
// The official client spends tens of µs of CPU per request (several write
// syscalls per request, reflection-based JSON headers), so on a small
// machine it, not the broker, sets the pace. With --client native the same
// runs speak the remoting protocol through this repository's own packages
// (rocketraft/remoting, protocol, message) and the output is the same:
//
//   - produce: the route of the topic, or while it has none TBW102's route
//     with at most 4 queues per broker (the broker then auto-creates the
//     topic), is looked up for up to 30 s (at most Duration). Concurrency
//     goroutines, spread over Connections remoting clients (one pipelined
//     connection per broker each), loop on SEND_MESSAGE_V2 or, with
//     Batch > 1, SEND_BATCH_MESSAGE, round-robin over the master queues of
//     the writable brokers. Sync and async mode are the same code: a
//     goroutine blocked in a pipelined Invoke is one request in flight.
//     Every message carries UNIQ_KEY (a per-run random prefix and a
//     counter), WAIT=true and TAGS with --tag. Only SUCCESS counts as
//     sent; FLUSH_DISK_TIMEOUT and other codes are errors named by code.
//   - consume: one goroutine per readable queue pulls (PULL_MESSAGE,
//     long polling up to 1 s, subscription in the request so no heartbeat
//     is needed, no offset commit) from offset 0 (--from first) or the
//     queue's max offset (--from last), counts the records of each body
//     and moves to nextBeginOffset. Groups' stored offsets are ignored.
//
// Native runs raise the Go GC target to 400 (unless GOGC is set), as the
// tool's small heap would otherwise be collected tens of times a second.
//
// # gRPC client (Client = ClientGRPC)
//
// With --client grpc --endpoint host:port the runs go through a RocketMQ 5
// gRPC proxy (mqproxy). The gRPC clients live in packages of their own,
// which a command installs with UseGRPC (extern.go), because the official
// 5.x Go client and this repository's stubs (proxy/rmqpb) register the same
// protobuf names and cannot share a binary:
//
//   - mqbench: this repository's lean client (bench/grpcnative): settings
//     once on a Telemetry stream per connection, then one unary SendMessage
//     per message, Concurrency calls in flight over Connections plaintext
//     HTTP/2 connections; its consumer's Pollers goroutines call
//     ReceiveMessage and ack each receive's messages with one AckMessage.
//   - mqbench5: the official 5.x Go client (bench/grpc5,
//     github.com/apache/rocketmq-clients/golang/v5), dialing plaintext unless
//     --grpc-tls: produce sends one message per SendMessage call (sync or
//     async, Producers client instances); consume runs Pollers goroutines of
//     one SimpleConsumer that Receive and Ack every message (a new group
//     starts at the queues' end).
//
// scripts/proxybench.sh compares both with direct remoting on the same group.
//
// # Measurement
//
// Completed operations are recorded in a Recorder: a set of independently
// locked shards, each with counters and a log-linear latency Histogram
// (HDR-like, < 0.8% relative error). Every reporting interval (1s) the
// reporter drains all shards and prints one line: elapsed time, msg/s,
// MiB/s of message bodies, p50/p99/p999/max latency of the operations
// completed in that interval, and errors. Intervals that start within the
// warm-up are marked and left out of the summary; the summary's rates are
// the steady-state messages divided by the steady-state time, and its
// percentiles come from the merged histogram of all steady-state
// intervals. For consumers, idle intervals before the first and after the
// last received message are left out of the steady-state time, so that a
// consumer started before its producer is not penalised.
//
// The summary is also available as one JSON line (Summary) for scripts.
package bench
