package broker

import (
	"encoding/binary"
	"strconv"

	"rocketraft/message"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// Caps on QUERY_MESSAGE results (defaultQueryMaxNum / maxMsgsNumBatch).
const (
	defaultQueryMaxNum = 32
	maxQueryNum        = 64
)

// queryHandlers answer the admin tools' lookups of stored messages (QUERY_MESSAGE by key,
// VIEW_MESSAGE_BY_ID by commitlog offset). They only read the store, which acquire hands out
// (Broker.acquireStore), so they work alike on every replica.
type queryHandlers struct {
	acquire func() (*storage.Store, func(), error)
}

// handleQueryMessage looks messages up in the index by key, or by unique key
// when _UNIQUE_KEY_QUERY=true, and returns them in stored layout. The index
// compares hashes, so results are re-checked here as clients do.
func (q *queryHandlers) handleQueryMessage(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, key := req.Ext("topic"), req.Ext("key")
	maxNum, err1 := req.ExtInt32("maxNum")
	begin, err2 := req.ExtInt64("beginTimestamp")
	end, err3 := req.ExtInt64("endTimestamp")
	if topic == "" || key == "" || err1 != nil || err2 != nil || err3 != nil {
		return req.NewResponse(remoting.SystemError, "bad query header: topic, key, maxNum, beginTimestamp and endTimestamp are required")
	}
	uniq := req.ExtBool("_UNIQUE_KEY_QUERY")
	if uniq {
		maxNum = defaultQueryMaxNum
	}
	maxNum = min(max(maxNum, 1), maxQueryNum)
	st, release, err := q.acquire()
	if err != nil {
		return storeUnavailable(req, err)
	}
	records, lastTS, lastPhy := st.QueryByKey(topic, key, int(maxNum), begin, end)
	release()
	var body []byte
	for _, rec := range records {
		if matchesKey(rec, topic, key, uniq) {
			body = append(body, rec...)
		}
	}
	if len(body) == 0 {
		return req.NewResponse(remoting.QueryNotFound, "can not find message, maybe time range not correct")
	}
	resp := req.NewResponse(remoting.Success, "")
	resp.SetExt("indexLastUpdateTimestamp", strconv.FormatInt(lastTS, 10))
	resp.SetExt("indexLastUpdatePhyoffset", strconv.FormatInt(lastPhy, 10))
	resp.Body = body
	return resp
}

// matchesKey re-checks a record the index returned for key (the index compares only hashes):
// its topic, and its keys or unique key.
func matchesKey(rec []byte, topic, key string, uniq bool) bool {
	v, err := message.ParseView(rec)
	if err != nil || string(v.Topic()) != topic {
		return false
	}
	if uniq {
		u, _ := v.Property(message.PropertyUniqClientMessageID)
		return string(u) == key
	}
	for _, k := range splitKeys(string(v.Keys())) {
		if k == key {
			return true
		}
	}
	u, _ := v.Property(message.PropertyUniqClientMessageID)
	return string(u) == key
}

// splitKeys splits a KEYS property on spaces, as clients join a message's keys.
func splitKeys(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ' ' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// handleViewMessageByID returns the record at a commitlog offset, which a
// client decoded from an offset msgId.
func (q *queryHandlers) handleViewMessageByID(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	off, err := req.ExtInt64("offset")
	if err != nil {
		return req.NewResponse(remoting.SystemError, "bad view header: "+err.Error())
	}
	st, release, err := q.acquire()
	if err != nil {
		return storeUnavailable(req, err)
	}
	rec, err := st.ReadRecord(off) // a copy: safe after release
	release()
	if err != nil {
		return req.NewResponse(remoting.SystemError, "can not find message by the offset, "+strconv.FormatInt(off, 10))
	}
	resp := req.NewResponse(remoting.Success, "")
	resp.Body = rec
	return resp
}

// physicalOffsetOf reads a stored record's commitlog offset (0 if the record is too short).
func physicalOffsetOf(rec []byte) int64 {
	if len(rec) < message.OffsetPhysicalOffset+8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(rec[message.OffsetPhysicalOffset:]))
}
