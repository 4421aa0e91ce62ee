package broker

import (
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"time"

	"rocketraft/broker/meta"
	"rocketraft/fsm"
	"rocketraft/internal/version"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/sqlfilter"
	"rocketraft/storage"
)

// brokerVersionDesc is reported in GET_BROKER_RUNTIME_INFO.
const brokerVersionDesc = "V4_9_4 (rocketraft)"

// handleUpdateTopic serves UPDATE_AND_CREATE_TOPIC. DLedger mode: a follower forwards it to the
// leader, which answers once the config is committed through Raft and applied on the leader.
func (b *Broker) handleUpdateTopic(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if fwd := b.forwardOrRefuse(conn, req); fwd != nil {
		return fwd
	}
	topic := req.Ext("topic")
	if err := message.ValidateTopic(topic); err != nil {
		return req.NewResponse(remoting.InvalidParameter, "invalid topic: "+err.Error())
	}
	if meta.IsSystemTopic(topic) && b.topics.Get(topic) == nil {
		return req.NewResponse(remoting.InvalidParameter, "The topic["+topic+"] is conflict with system topic.")
	}
	tc := protocol.NewTopicConfig(topic)
	var err error
	if tc.ReadQueueNums, err = req.ExtInt32("readQueueNums"); err != nil {
		return req.NewResponse(remoting.SystemError, err.Error())
	}
	if tc.WriteQueueNums, err = req.ExtInt32("writeQueueNums"); err != nil {
		return req.NewResponse(remoting.SystemError, err.Error())
	}
	if tc.Perm, err = req.ExtInt32("perm"); err != nil {
		return req.NewResponse(remoting.SystemError, err.Error())
	}
	if tc.ReadQueueNums <= 0 || tc.WriteQueueNums <= 0 || tc.ReadQueueNums > 1024 || tc.WriteQueueNums > 1024 {
		return req.NewResponse(remoting.InvalidParameter, "queue numbers must be between 1 and 1024")
	}
	if f := req.Ext("topicFilterType"); f != "" {
		if f != protocol.FilterSingleTag && f != protocol.FilterMultiTag {
			return req.NewResponse(remoting.InvalidParameter, "unknown topicFilterType "+f)
		}
		tc.TopicFilterType = f
	}
	tc.TopicSysFlag = int32(req.ExtInt64Or("topicSysFlag", 0))
	tc.Order = req.ExtBool("order")
	if b.replicated() {
		unlock := b.metaMu.lock("topic", topic)
		if resp := b.topicAttributes(req, tc); resp != nil {
			unlock()
			return resp
		}
		err := b.proposeMetaTimeout(&fsm.MetaOp{Op: fsm.OpPutTopic, Topic: tc})
		unlock()
		if err != nil {
			return metaErrorResponse(req, "store topic config", err)
		}
	} else {
		if resp := b.topicAttributes(req, tc); resp != nil {
			return resp
		}
		if err := b.topics.Put(tc); err != nil {
			return req.NewResponse(remoting.SystemError, "store topic config: "+err.Error())
		}
	}
	b.logger.Info("topic created or updated", "topic", topic, "read", tc.ReadQueueNums, "write", tc.WriteQueueNums, "perm", tc.Perm, "attributes", tc.Attributes)
	b.triggerRegister()
	return req.NewResponse(remoting.Success, "")
}

// handleDeleteTopic serves DELETE_TOPIC_IN_BROKER. DLedger mode: a follower forwards it; the
// leader proposes fsm's deleteTopic, which every node applies to its config, its consumer offsets
// of the topic and its consume queues (the state machine deletes those deterministically).
func (b *Broker) handleDeleteTopic(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if fwd := b.forwardOrRefuse(conn, req); fwd != nil {
		return fwd
	}
	topic := req.Ext("topic")
	if topic == "" {
		return req.NewResponse(remoting.SystemError, "the custom field <topic> is null")
	}
	if meta.IsSystemTopic(topic) {
		return req.NewResponse(remoting.InvalidParameter, "system topic "+topic+" cannot be deleted")
	}
	if b.replicated() {
		unlock := b.metaMu.lock("topic", topic)
		err := b.proposeMetaTimeout(&fsm.MetaOp{Op: fsm.OpDeleteTopic, Name: topic})
		unlock()
		if err != nil {
			return metaErrorResponse(req, "delete topic", err)
		}
		b.logger.Info("topic deleted through raft", "topic", topic)
		return req.NewResponse(remoting.Success, "")
	}
	if _, err := b.topics.Delete(topic); err != nil {
		return req.NewResponse(remoting.SystemError, "delete topic config: "+err.Error())
	}
	b.offsets.DeleteTopic(topic)
	if err := b.local.DeleteTopic(topic); err != nil { // classic mode: the local store
		return req.NewResponse(remoting.SystemError, "delete consume queues: "+err.Error())
	}
	b.logger.Info("topic deleted", "topic", topic)
	b.triggerRegister()
	return req.NewResponse(remoting.Success, "")
}

func (b *Broker) jsonResponse(req *remoting.Command, v any) *remoting.Command {
	body, err := protocol.Encode(v)
	if err != nil {
		return req.NewResponse(remoting.SystemError, "encode body: "+err.Error())
	}
	resp := req.NewResponse(remoting.Success, "")
	resp.Body = body
	return resp
}

func (b *Broker) fastjsonResponse(req *remoting.Command, v protocol.FastjsonEncoder) *remoting.Command {
	body, err := v.EncodeFastjson()
	if err != nil {
		return req.NewResponse(remoting.SystemError, "encode body: "+err.Error())
	}
	resp := req.NewResponse(remoting.Success, "")
	resp.Body = body
	return resp
}

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
	if a := b.httpAddr.Load(); a != nil {
		table["httpAddr"] = *a // ours: the status page, for the name server's page to link to
	}
	return b.jsonResponse(req, protocol.KVTable{Table: table})
}

// handleUpdateGroup serves UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (DLedger: forwarded by a follower,
// proposed through Raft by the leader).
func (b *Broker) handleUpdateGroup(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if fwd := b.forwardOrRefuse(conn, req); fwd != nil {
		return fwd
	}
	var gc protocol.SubscriptionGroupConfig
	if err := protocol.Decode(req.Body, &gc); err != nil {
		return req.NewResponse(remoting.SystemError, "bad subscription group body: "+err.Error())
	}
	if err := message.ValidateGroup(gc.GroupName); err != nil {
		return req.NewResponse(remoting.InvalidParameter, err.Error())
	}
	if b.replicated() {
		unlock := b.metaMu.lock("group", gc.GroupName)
		err := b.proposeMetaTimeout(&fsm.MetaOp{Op: fsm.OpPutGroup, Group: &gc})
		unlock()
		if err != nil {
			return metaErrorResponse(req, "store subscription group", err)
		}
		return req.NewResponse(remoting.Success, "")
	}
	if err := b.groups.Put(&gc); err != nil {
		return req.NewResponse(remoting.SystemError, "store subscription group: "+err.Error())
	}
	return req.NewResponse(remoting.Success, "")
}

// handleDeleteGroup serves DELETE_SUBSCRIPTIONGROUP. DLedger mode: forwarded by a follower; the
// leader proposes fsm's deleteGroup, which also deletes the group's consumer offsets on every
// node whatever cleanOffset says (the op has no such flag).
func (b *Broker) handleDeleteGroup(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if fwd := b.forwardOrRefuse(conn, req); fwd != nil {
		return fwd
	}
	group := req.Ext("groupName")
	if group == "" {
		return req.NewResponse(remoting.SystemError, "the custom field <groupName> is null")
	}
	if b.replicated() {
		unlock := b.metaMu.lock("group", group)
		err := b.proposeMetaTimeout(&fsm.MetaOp{Op: fsm.OpDeleteGroup, Name: group})
		unlock()
		if err != nil {
			return metaErrorResponse(req, "delete subscription group", err)
		}
		return req.NewResponse(remoting.Success, "")
	}
	if _, err := b.groups.Delete(group); err != nil {
		return req.NewResponse(remoting.SystemError, "delete subscription group: "+err.Error())
	}
	if req.ExtBool("cleanOffset") {
		b.offsets.DeleteGroup(group)
	}
	return req.NewResponse(remoting.Success, "")
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

// lastStoreTime is the store time of the message just before offset in a
// queue, or 0 when there is none.
func lastStoreTime(st *storage.Store, topic string, qid int32, offset int64) int64 {
	if offset <= 0 {
		return 0
	}
	res := st.GetMessages(topic, qid, offset-1, 1, maxPullBytes, nil)
	if len(res.Records) == 0 {
		return 0
	}
	v, err := message.ParseView(res.Records[0])
	if err != nil {
		return 0
	}
	return v.StoreTimestamp()
}

func (b *Broker) handleTopicStats(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic := req.Ext("topic")
	tc := b.topics.Get(topic)
	if tc == nil {
		return req.NewResponse(remoting.TopicNotExist, "topic["+topic+"] not exist")
	}
	table := &protocol.TopicStatsTable{OffsetTable: map[protocol.MessageQueue]protocol.TopicOffset{}}
	st, release, err := b.acquireStore()
	if err != nil {
		return storeUnavailable(req, err)
	}
	for q := int32(0); q < tc.WriteQueueNums; q++ {
		maxOff := st.MaxOffset(topic, q)
		table.OffsetTable[protocol.MessageQueue{Topic: topic, BrokerName: b.cfg.BrokerName, QueueID: q}] = protocol.TopicOffset{
			MinOffset: st.MinOffset(topic, q), MaxOffset: maxOff, LastUpdateTimestamp: lastStoreTime(st, topic, q, maxOff),
		}
	}
	release()
	return b.fastjsonResponse(req, table)
}

func (b *Broker) handleConsumerConnections(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Ext("consumerGroup")
	info, ok := b.clients.ConsumerGroup(group)
	if !ok || len(info.Connections) == 0 {
		return req.NewResponse(remoting.ConsumerNotOnline, "the consumer group["+group+"] not online")
	}
	return b.jsonResponse(req, info.ConsumerConnection())
}

func (b *Broker) handleProducerConnections(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Ext("producerGroup")
	conns := b.clients.ProducerConnections(group)
	if len(conns) == 0 {
		return req.NewResponse(remoting.SystemError, "the producer group["+group+"] not exist")
	}
	return b.jsonResponse(req, protocol.ProducerConnection{ConnectionSet: conns})
}

// handleConsumeStats reports, per queue of the group's topics, how far the
// broker is ahead of the group (GET_CONSUME_STATS, used by consumerProgress).
func (b *Broker) handleConsumeStats(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Ext("consumerGroup")
	if group == "" {
		return req.NewResponse(remoting.SystemError, "the custom field <consumerGroup> is null")
	}
	topics := map[string]bool{}
	if t := req.Ext("topic"); t != "" {
		topics[t] = true
	} else {
		for _, t := range b.offsets.TopicsOfGroup(group) {
			topics[t] = true
		}
		for _, t := range b.clients.TopicsConsumedBy(group) {
			topics[t] = true
		}
	}
	stats := &protocol.ConsumeStats{OffsetTable: map[protocol.MessageQueue]protocol.OffsetWrapper{}}
	st, release, err := b.acquireStore()
	if err != nil {
		return storeUnavailable(req, err)
	}
	defer release() // the offset tables below are in-memory reads: nothing here waits
	for t := range topics {
		tc := b.topics.Get(t)
		if tc == nil {
			continue
		}
		for q := int32(0); q < tc.ReadQueueNums; q++ {
			consumer, ok := b.committedOffset(group, t, q)
			if !ok {
				consumer = -1
			}
			pull, _ := b.offsets.PullOffset(group, t, q)
			stats.OffsetTable[protocol.MessageQueue{Topic: t, BrokerName: b.cfg.BrokerName, QueueID: q}] = protocol.OffsetWrapper{
				BrokerOffset: st.MaxOffset(t, q), ConsumerOffset: consumer, PullOffset: pull,
				LastTimestamp: lastStoreTime(st, t, q, consumer),
			}
		}
	}
	return b.fastjsonResponse(req, stats)
}

func (b *Broker) handleConsumedByWho(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic := req.Ext("topic")
	set := map[string]bool{}
	for _, g := range b.offsets.GroupsOfTopic(topic) {
		set[g] = true
	}
	for _, g := range b.clients.ConsumerGroups() {
		for _, t := range b.clients.TopicsConsumedBy(g) {
			if t == topic {
				set[g] = true
			}
		}
	}
	groups := make([]string, 0, len(set))
	for g := range set {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	return b.jsonResponse(req, struct {
		GroupList []string `json:"groupList"`
	}{groups})
}

func (b *Broker) registerHandlers(s *remoting.Server) {
	registerUnsupported(s) // first: a real handler registered below replaces its entry
	for _, code := range []int32{remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage} {
		s.HandleInline(code, b.handleSend, b.sendsInline)
	}
	s.Handle(remoting.PullMessage, b.handlePull)
	s.Handle(remoting.LitePullMessage, b.handlePull)
	s.Handle(remoting.ConsumerSendMsgBack, b.handleSendBack)        // sendback.go
	s.Handle(remoting.GetAllDelayOffset, b.handleGetAllDelayOffset) // schedule.go
	b.registerOffsetHandlers(s)
	b.registerPopHandlers(s) // pop.go
	b.registerRaftAdminHandlers(s)
	s.Handle(remoting.HeartBeat, b.handleHeartbeat)
	s.Handle(remoting.EndTransaction, b.handleEndTransaction) // transaction.go
	s.Handle(remoting.UnregisterClient, b.handleUnregisterClient)
	s.Handle(remoting.GetConsumerListByGroup, b.handleGetConsumerList)
	s.Handle(remoting.LockBatchMQ, b.handleLockBatch)
	s.Handle(remoting.UnlockBatchMQ, b.handleUnlockBatch)
	s.Handle(remoting.QueryMessage, b.handleQueryMessage)
	s.Handle(remoting.ViewMessageByID, b.handleViewMessageByID)
	s.Handle(remoting.UpdateAndCreateTopic, b.handleUpdateTopic)
	s.Handle(remoting.DeleteTopicInBroker, b.handleDeleteTopic)
	s.Handle(remoting.GetTopicConfig, b.handleGetTopicConfig)                         // topicattr.go
	s.Handle(remoting.GetSubscriptionGroupConfig, b.handleGetSubscriptionGroupConfig) // topicattr.go
	s.Handle(remoting.GetAllTopicConfig, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		return b.jsonResponse(req, b.topics.Wrapper())
	})
	s.Handle(remoting.GetBrokerRuntimeInfo, b.handleRuntimeInfo)
	s.Handle(remoting.GetBrokerHAStatus, b.handleHAStatus)
	s.Handle(remoting.UpdateAndCreateSubscriptionGroup, b.handleUpdateGroup)
	s.Handle(remoting.GetAllSubscriptionGroupConfig, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		return b.jsonResponse(req, b.groups.Wrapper())
	})
	s.Handle(remoting.DeleteSubscriptionGroup, b.handleDeleteGroup)
	s.Handle(remoting.GetTopicStatsInfo, b.handleTopicStats)
	s.Handle(remoting.GetConsumerConnectionList, b.handleConsumerConnections)
	s.Handle(remoting.GetProducerConnectionList, b.handleProducerConnections)
	s.Handle(remoting.GetConsumeStats, b.handleConsumeStats)
	s.Handle(remoting.GetAllConsumerOffset, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		return b.jsonResponse(req, b.offsets.Wrapper())
	})
	s.Handle(remoting.QueryTopicConsumeByWho, b.handleConsumedByWho)
	s.Handle(remoting.ViewBrokerStatsData, b.handleViewStatsData) // statsdata.go
	s.Handle(remoting.InvokeBrokerToResetOffset, b.handleResetOffset)
	s.Handle(remoting.UpdateBrokerConfig, b.handleUpdateBrokerConfig) // brokerconfig.go: allow-listed keys only
	s.Handle(remoting.GetBrokerConfig, b.handleGetBrokerConfig)       // getbrokerconfig.go: secrets redacted
	s.Handle(remoting.CheckClientConfig, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		var body protocol.CheckClientConfigBody
		if err := protocol.Decode(req.Body, &body); err != nil {
			return req.NewResponse(remoting.SystemError, "bad body: "+err.Error())
		}
		switch t := body.SubscriptionData.ExpressionType; {
		case t == protocol.ExpressionSQL92 && b.cfg.EnablePropertyFilter:
			if _, err := sqlfilter.Parse(body.SubscriptionData.SubString); err != nil {
				return req.NewResponse(remoting.SubscriptionParseFailed, "parse the SQL92 subscription failed: "+err.Error())
			}
		case t != "" && t != protocol.ExpressionTag:
			return req.NewResponse(remoting.SystemError, fmt.Sprintf("the broker does not support consumer to filter message by %s", t))
		}
		return req.NewResponse(remoting.Success, "")
	})
}
