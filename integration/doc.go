// Package integration runs the real mqnamesrv and mqbroker binaries and drives them with the
// unmodified official Go client (github.com/apache/rocketmq-client-go/v2), plus raw remoting
// frames where the client has no API (query/view) or must not be used (malformed input).
//
// Harness contract (what the binaries must do):
//
//   - `mqnamesrv --listen 127.0.0.1:<port>` serves the name server on that address.
//   - `mqbroker -c <file> [--<key>=<value> ...]` reads RocketMQ keys from the properties file
//     (namesrvAddr, listenPort, brokerIP1=127.0.0.1, storePathRootDir, ...), flags override it,
//     it binds listenPort (and may bind listenPort-2 and listenPort+1, both kept free), and
//     registers with the name server at start.
//   - SIGTERM stops either process cleanly (flush, persist offsets, exit); SIGKILL is a crash.
//   - A restarted broker on the same storePathRootDir recovers everything it acknowledged.
//
// Every process is started on 127.0.0.1 ports picked by the harness, with its data under
// t.TempDir() and HOME pointed there too; its output goes to a log file that is printed when
// the test fails; every process is stopped by PID in t.Cleanup.
//
// Environment knobs: RR_BIN_DIR=<dir> uses prebuilt binaries instead of building them;
// RR_KEEP_LOGS=<dir> copies every process log there. Unless -parallel is given, TestMain runs
// 6 tests at once (they mostly wait on child processes); the suite takes ~15 s.
//
// Do not run this package with -race: the Go client itself has data races (e.g. in
// consumer/process_queue.go and the orderly consume path) that make the race detector fail
// tests regardless of our code. Build the binaries with -race instead if needed (RR_BIN_DIR).
//
// Tests (each starts its own name server and broker; all run in parallel):
//
//	TestSendModesDenseOffsets                 (a) sync/async/oneway/batch, dense offsets
//	TestSendToChosenQueue                     manual queue selection is honoured
//	TestPushAndPullConsumersGetExactlySentSet (b) push and pull consumers, exact set
//	TestTwoPushConsumersSplitQueues           (c) one group, two members share queues
//	TestBroadcastingConsumersEachGetAll       (d) broadcasting
//	TestTagFilter                             (e) "TagA || TagB", client and broker side
//	TestOrderlyConsumptionPerKey              (f) per-key order with an orderly consumer
//	TestCommittedOffsetsSurviveRestart        (g) offsets across a broker restart
//	TestQueryByKeyAndViewByID                 (h) QUERY_MESSAGE / VIEW_MESSAGE_BY_ID
//	TestCrashUnderLoadLosesNoAckedMessage     (i) kill -9 under load, SYNC and ASYNC flush,
//	                                              then an offline consume-queue/commitlog check
//	TestBadInput                              (j) malformed frames and invalid sends
//	TestFrameCodec, TestRecordParser, TestStoreChecker
//	                                          self-tests of the harness's decoders
package integration
