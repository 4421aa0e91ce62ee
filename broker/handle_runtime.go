package broker

// GET_BROKER_RUNTIME_INFO: the broker's figures for mqadmin brokerStatus (HA's part: ha.go).

import (
	"runtime"
	"strconv"
	"time"

	"rocketraft/internal/version"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// brokerVersionDesc is reported in GET_BROKER_RUNTIME_INFO.
const brokerVersionDesc = "V4_9_4 (rocketraft)"

// handleRuntimeInfo serves GET_BROKER_RUNTIME_INFO: RocketMQ's key/value table of the broker's
// figures, with ours beside them.
func (b *Broker) handleRuntimeInfo(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	st, err := b.storeStats()
	if err != nil {
		return storeUnavailable(req, err)
	}
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	table := map[string]string{
		"brokerVersionDesc": brokerVersionDesc,
		"brokerVersion":     strconv.Itoa(int(remoting.ServerVersion)),
		// Ours: which rocketraft build runs (internal/version), beside RocketMQ's keys.
		"rocketraftVersion":           version.Get().String(),
		"brokerRole":                  b.roleName(),
		"brokerName":                  b.cfg.BrokerName,
		"brokerAddr":                  b.brokerAddr,
		"flushDiskType":               b.cfg.FlushDiskType,
		"msgPutTotalTodayNow":         i64(b.stats.putTotal.Load()),
		"msgGetTotalTodayNow":         i64(b.stats.getTotal.Load()),
		"msgPutTotalYesterdayMorning": "0",
		"msgGetTotalYesterdayMorning": "0",
		"msgPutTotalTodayMorning":     "0",
		"msgGetTotalTodayMorning":     "0",
		"commitLogMinOffset":          i64(st.CommitLogMinOffset),
		"commitLogMaxOffset":          i64(st.CommitLogMaxOffset),
		"dispatchBehindBytes":         "0",
		"pageCacheLockTimeMills":      "0",
		"sendThreadPoolQueueSize":     "0",
		"pullThreadPoolQueueSize":     "0",
		"bootTimestamp":               i64(b.stats.started.UnixMilli()),
		"runtime":                     time.Since(b.stats.started).Round(time.Second).String(),
		"goroutines":                  strconv.Itoa(runtime.NumGoroutine()),
		"topicCount":                  strconv.Itoa(len(b.topics.Names())),
	}
	table["putMessageTimesTotal"] = i64(st.PutMessageTimesTotal)
	table["putMessageSizeTotal"] = i64(st.PutMessageSizeTotal)
	table["commitLogFlushedOffset"] = i64(st.CommitLogFlushed)
	table["commitLogDiskRatio"] = strconv.FormatFloat(st.DiskRatio/100, 'f', 4, 64)
	table["diskFull"] = strconv.FormatBool(st.DiskFull)
	table["storeWriteFailed"] = strconv.FormatBool(st.WriteFailed)
	table["consumeQueueCount"] = strconv.Itoa(st.Queues)
	b.addHARuntimeInfo(table)
	if a := b.status.httpAddr.Load(); a != nil {
		table["httpAddr"] = *a // ours: the status page, for the name server's page to link to
	}
	return b.jsonResponse(req, protocol.KVTable{Table: table})
}

// storeStats returns the store's figures (GET_BROKER_RUNTIME_INFO, /status).
func (b *Broker) storeStats() (storage.Stats, error) {
	st, release, err := b.acquireStore()
	if err != nil {
		return storage.Stats{}, err
	}
	defer release()
	return st.Stats(), nil
}
