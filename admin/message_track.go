package admin

// A message's trace, as Java's queryMsgById prints after the message: where it was stored
// (broker group, queue, offset, store time, from the message itself and the cluster info) and,
// for every consumer group that consumes its topic (QUERY_TOPIC_CONSUME_BY_WHO, 300), whether
// that group has consumed it. Java's rules: a group without online consumers is NOT_ONLINE
// (GET_CONSUMER_CONNECTION_LIST, 203, answers CONSUMER_NOT_ONLINE), a pull consumer's group is
// PULL (the broker cannot tell), otherwise CONSUMED when the group's committed offset on the
// message's queue (GET_CONSUME_STATS, 208) is past the message's queue offset,
// CONSUMED_BUT_FILTERED when its subscription does not take the message's tag, and
// NOT_CONSUME_YET otherwise. Beyond Java, the committed offset is read for every group, so an
// offline group's row still says whether it got past the message.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// Track types, Java's names.
const (
	TrackConsumed         = "CONSUMED"
	TrackConsumedFiltered = "CONSUMED_BUT_FILTERED"
	TrackNotConsumeYet    = "NOT_CONSUME_YET"
	TrackNotOnline        = "NOT_ONLINE"
	TrackPull             = "PULL"
	TrackUnknown          = "UNKNOWN"
)

// MessageTrack is one consumer group's status for one message.
type MessageTrack struct {
	ConsumerGroup string `json:"consumerGroup"`
	TrackType     string `json:"trackType"`
	// ConsumerOffset is the group's committed offset on the message's queue (-1: none, or not
	// read); Consumed says it is past the message's queue offset.
	ConsumerOffset int64  `json:"consumerOffset"`
	Consumed       bool   `json:"consumed"`
	ExceptionDesc  string `json:"exceptionDesc,omitempty"`
}

// MessageTrace is a message with where it was stored and its tracks.
type MessageTrace struct {
	MessageInfo
	BrokerName string         `json:"brokerName"` // the broker group holding the store host ("" when not registered now)
	Tracks     []MessageTrack `json:"tracks"`
}

// TraceMessage adds to m where it was stored and each consuming group's status.
func (t *Tool) TraceMessage(ctx context.Context, m MessageInfo) (*MessageTrace, error) {
	tr := &MessageTrace{MessageInfo: m, Tracks: []MessageTrack{}}
	if ci, err := t.ClusterInfo(ctx); err == nil {
		all, _ := ClusterBrokers(ci, "", false)
		for _, b := range all {
			if b.Addr == m.StoreHost {
				tr.BrokerName = b.BrokerName
			}
		}
	}
	rd, err := t.TopicRoute(ctx, m.Topic)
	if err != nil {
		return tr, fmt.Errorf("route of %s: %w", m.Topic, err)
	}
	masters := RouteMasters(rd)
	if tr.BrokerName == "" && len(rd.BrokerDatas) == 1 {
		tr.BrokerName = rd.BrokerDatas[0].BrokerName // the topic lives in one group: it is that one
	}
	for _, g := range t.consumingGroups(ctx, masters, m.Topic) { // stats_all.go
		tr.Tracks = append(tr.Tracks, t.track(ctx, masters, tr, g))
	}
	return tr, nil
}

// track works out one group's status (see the file comment).
func (t *Tool) track(ctx context.Context, masters []BrokerAddr, m *MessageTrace, group string) MessageTrack {
	mt := MessageTrack{ConsumerGroup: group, TrackType: TrackUnknown, ConsumerOffset: -1}
	ext := map[string]string{"consumerGroup": group, "topic": m.Topic}
	var offErr error
	for _, r := range t.callBrokers(ctx, masters, remoting.GetConsumeStats, ext, nil) {
		if r.Err != nil {
			offErr = r.Err
			continue
		}
		var cs protocol.ConsumeStats
		if err := protocol.Decode(r.Resp.Body, &cs); err != nil {
			offErr = fmt.Errorf("decode consume stats from %s: %w", r.Broker.Addr, err)
			continue
		}
		for mq, o := range cs.OffsetTable {
			if mq.Topic == m.Topic && mq.QueueID == m.QueueID && (m.BrokerName == "" || mq.BrokerName == m.BrokerName) {
				mt.ConsumerOffset = o.ConsumerOffset
				mt.Consumed = o.ConsumerOffset > m.QueueOffset
			}
		}
	}
	var cc *protocol.ConsumerConnection
	var connErr error
	for _, b := range masters {
		resp, err := t.call(ctx, b.Addr, remoting.GetConsumerConnectionList, map[string]string{"consumerGroup": group}, nil)
		if err != nil {
			connErr = err
			continue
		}
		var c protocol.ConsumerConnection
		if err := protocol.Decode(resp.Body, &c); err == nil {
			cc = &c
			break
		}
	}
	switch {
	case cc == nil:
		if IsCode(connErr, remoting.ConsumerNotOnline) {
			mt.TrackType = TrackNotOnline
		}
		mt.ExceptionDesc = exceptionDesc(connErr)
	case cc.ConsumeType == protocol.ConsumeActively:
		mt.TrackType = TrackPull
	case mt.Consumed:
		mt.TrackType = TrackConsumed
		if sd, ok := cc.SubscriptionTable[m.Topic]; ok && !takesTag(sd, m.Tags) {
			mt.TrackType = TrackConsumedFiltered
		}
	case offErr != nil && mt.ConsumerOffset < 0:
		mt.ExceptionDesc = exceptionDesc(offErr)
	default:
		mt.TrackType = TrackNotConsumeYet
	}
	return mt
}

// exceptionDesc renders a broker's refusal as Java does ("CODE:206 DESC:..."), other errors
// as they are.
func exceptionDesc(err error) string {
	var re *ResponseError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &re):
		return fmt.Sprintf("CODE:%d DESC:%s", re.Code, re.Remark)
	}
	return err.Error()
}

// takesTag reports whether a subscription takes a message with tags (Java's check: the tag set
// holds the tag or "*", or is empty).
func takesTag(sd protocol.SubscriptionData, tags string) bool {
	return len(sd.TagsSet) == 0 || slices.Contains(sd.TagsSet, "*") || slices.Contains(sd.TagsSet, tags)
}

// printTrace writes the storage line and one MessageTrack line per group, Java's format for
// the latter, with the committed offset after it.
func (t *Tool) printTrace(tr *MessageTrace) {
	t.printf("%-20s %s\n", "Broker Name:", cmp.Or(tr.BrokerName, "unknown (store host not registered now)"))
	t.printf("%-20s broker %s, queue %d, offset %d, stored %s\n", "Stored At:", cmp.Or(tr.BrokerName, tr.StoreHost),
		tr.QueueID, tr.QueueOffset, t.formatMillis(tr.StoreTimestamp, "0"))
	t.printf("\n")
	if len(tr.Tracks) == 0 {
		t.printf("No consumer group consumes topic %s\n", tr.Topic)
		return
	}
	for _, mt := range tr.Tracks {
		desc := "null"
		if mt.ExceptionDesc != "" {
			desc = mt.ExceptionDesc
		}
		t.printf("MessageTrack [consumerGroup=%s, trackType=%s, exceptionDesc=%s]", mt.ConsumerGroup, mt.TrackType, desc)
		switch {
		case mt.ConsumerOffset < 0:
			t.printf("  (no committed offset on queue %d)\n", tr.QueueID)
		default:
			t.printf("  (committed offset %d: %s)\n", mt.ConsumerOffset, map[bool]string{true: "consumed", false: "not consumed yet"}[mt.Consumed])
		}
	}
}
