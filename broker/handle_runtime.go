package broker

// GET_BROKER_RUNTIME_INFO: the broker's figures for mqadmin brokerStatus (HA's part: ha.go).

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/internal/version"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// brokerVersionDesc is reported in GET_BROKER_RUNTIME_INFO.
const brokerVersionDesc = "V4_9_4 (rocketraft)"

// runtimeHandlers answers what mqadmin reads about the running broker: GET_BROKER_RUNTIME_INFO
// and VIEW_BROKER_STATS_DATA (statsdata.go). It only reads: the counters, the store's figures,
// the status sampler and what the role and HA parts report through func values.
type runtimeHandlers struct {
	cfg    *config.Broker
	topics *meta.Topics
	stats  *stats
	// acquire is the store reads go to (Broker.acquireStore's rules).
	acquire func() (*storage.Store, func(), error)
	// roleName and addr describe the node as registered (addr is known once it listens).
	roleName func() string
	addr     func() string
	// addHARuntimeInfo adds brokerId and the replication keys (ha.go).
	addHARuntimeInfo func(table map[string]string)
	// httpAddr is where the status page answers (nil: off); rates the status sampler (nil
	// before the HTTP endpoints start). Both are set after New, so they are read per request.
	httpAddr *atomic.Pointer[string]
	rates    *atomic.Pointer[statusRates]
}

// handleRuntimeInfo serves GET_BROKER_RUNTIME_INFO: RocketMQ's key/value table of the broker's
// figures, with ours beside them.
func (h *runtimeHandlers) handleRuntimeInfo(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	st, err := h.storeStats()
	if err != nil {
		return storeUnavailable(req, err)
	}
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	table := map[string]string{
		"brokerVersionDesc": brokerVersionDesc,
		"brokerVersion":     strconv.Itoa(int(remoting.ServerVersion)),
		// Ours: which rocketraft build runs (internal/version), beside RocketMQ's keys.
		"rocketraftVersion":           version.Get().String(),
		"brokerRole":                  h.roleName(),
		"brokerName":                  h.cfg.BrokerName,
		"brokerAddr":                  h.addr(),
		"flushDiskType":               h.cfg.FlushDiskType,
		"msgPutTotalTodayNow":         i64(h.stats.putTotal.Load()),
		"msgGetTotalTodayNow":         i64(h.stats.getTotal.Load()),
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
		"bootTimestamp":               i64(h.stats.started.UnixMilli()),
		"runtime":                     time.Since(h.stats.started).Round(time.Second).String(),
		"goroutines":                  strconv.Itoa(runtime.NumGoroutine()),
		"topicCount":                  strconv.Itoa(len(h.topics.Names())),
	}
	table["putMessageTimesTotal"] = i64(st.PutMessageTimesTotal)
	table["putMessageSizeTotal"] = i64(st.PutMessageSizeTotal)
	table["commitLogFlushedOffset"] = i64(st.CommitLogFlushed)
	table["commitLogDiskRatio"] = strconv.FormatFloat(st.DiskRatio/100, 'f', 4, 64)
	table["diskFull"] = strconv.FormatBool(st.DiskFull)
	table["storeWriteFailed"] = strconv.FormatBool(st.WriteFailed)
	table["consumeQueueCount"] = strconv.Itoa(st.Queues)
	h.addHARuntimeInfo(table)
	if a := h.httpAddr.Load(); a != nil {
		table["httpAddr"] = *a // ours: the status page, for the name server's page to link to
	}
	return jsonResponse(req, protocol.KVTable{Table: table})
}

// storeStats returns the store's figures (GET_BROKER_RUNTIME_INFO, /status).
func (h *runtimeHandlers) storeStats() (storage.Stats, error) {
	st, release, err := h.acquire()
	if err != nil {
		return storage.Stats{}, err
	}
	defer release()
	return st.Stats(), nil
}
