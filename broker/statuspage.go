package broker

// The status page: GET / (and /ui) on httpPort serves statuspage.html, one self-contained page
// (no external assets) that polls /status every 2 s and renders it. This file also assembles
// the parts of /status the page shows beside the identity, Raft and store figures of http.go:
// the topics with each queue's offsets and the consumer groups with their lag. Both are bounded
// (statusMaxTopics, statusMaxGroups) so a broker with many topics still answers quickly; the
// JSON says when it cut a list.

import (
	_ "embed"
	"net/http"
	"slices"
	"strings"

	"rocketraft/broker/meta"
	"rocketraft/protocol"
	"rocketraft/webui"
)

//go:embed statuspage.html
var statusPageHTML []byte

// Bounds of the /status lists.
const (
	statusMaxTopics = 500
	statusMaxGroups = 500
)

// StatusQueue is one queue of a topic on this broker: the offsets a consumer can read between.
type StatusQueue struct {
	QueueID   int32 `json:"queueId"`
	MinOffset int64 `json:"minOffset"`
	MaxOffset int64 `json:"maxOffset"`
}

// StatusTopic is one topic of this broker as /status shows it; Messages is the sum over its
// queues of max minus min offset (what is still stored).
type StatusTopic struct {
	Topic    string        `json:"topic"`
	System   bool          `json:"system"`
	Perm     int32         `json:"perm"`
	Messages int64         `json:"messages"`
	Queues   []StatusQueue `json:"queues"`
	// InPerSec and OutPerSec: messages stored and delivered per second, now (statusview.go).
	InPerSec  float64 `json:"inPerSec"`
	OutPerSec float64 `json:"outPerSec"`
}

// StatusGroupQueue is a consumer group's position on one queue; Lag is the queue's max offset
// minus the committed offset, never negative.
type StatusGroupQueue struct {
	QueueID        int32 `json:"queueId"`
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	Lag            int64 `json:"lag"`
}

// StatusGroup is one consumer group's progress on one topic of this broker (groups are listed
// per topic: a group's lag means little summed over unrelated topics).
type StatusGroup struct {
	Group  string             `json:"group"`
	Topic  string             `json:"topic"`
	Lag    int64              `json:"lag"`
	Queues []StatusGroupQueue `json:"queues"`
	// Online clients of the group, its consume rate (committed offsets per second) and its lag
	// in time: the age of its oldest unconsumed message, stored at OldestUnconsumed (ms since
	// the epoch); 0 when it is not behind, -1 when not measured (statusview.go).
	Online           int     `json:"online"`
	ConsumePerSec    float64 `json:"consumePerSec"`
	LagTimeMs        int64   `json:"lagTimeMs"`
	OldestUnconsumed int64   `json:"oldestUnconsumed,omitempty"`
}

// queueOffsets is what the assembly reads from the store (a *storage.Store), an interface so
// the unit tests can give fixed figures.
type queueOffsets interface {
	MinOffset(topic string, queueID int32) int64
	MaxOffset(topic string, queueID int32) int64
}

// topicsAndGroups builds the topic and consumer-group lists of /status from the topic configs,
// the committed offsets (keyed topic@group) and the store's queue offsets. Topics are sorted by
// name, groups by group then topic; truncated says a list was cut at its bound.
func topicsAndGroups(topics []*protocol.TopicConfig, committed map[string]map[int32]int64, st queueOffsets, isSystem func(string) bool,
	maxTopics, maxGroups int) (ts []StatusTopic, gs []StatusGroup, truncated bool) {
	ts, gs = []StatusTopic{}, []StatusGroup{}
	slices.SortFunc(topics, func(a, b *protocol.TopicConfig) int { return strings.Compare(a.TopicName, b.TopicName) })
	for _, tc := range topics {
		if len(ts) == maxTopics {
			truncated = true
			break
		}
		t := StatusTopic{Topic: tc.TopicName, System: isSystem(tc.TopicName), Perm: tc.Perm, Queues: []StatusQueue{}}
		for q := range max(tc.ReadQueueNums, tc.WriteQueueNums) {
			sq := StatusQueue{QueueID: q, MinOffset: st.MinOffset(tc.TopicName, q), MaxOffset: st.MaxOffset(tc.TopicName, q)}
			t.Messages += max(0, sq.MaxOffset-sq.MinOffset)
			t.Queues = append(t.Queues, sq)
		}
		ts = append(ts, t)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range committed {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		topic, group, ok := protocol.SplitOffsetKey(k)
		if !ok {
			continue
		}
		if len(gs) == maxGroups {
			truncated = true
			break
		}
		g := StatusGroup{Group: group, Topic: topic, Queues: []StatusGroupQueue{}}
		qs := committed[k]
		for _, q := range slices.Sorted(func(yield func(int32) bool) {
			for q := range qs {
				if !yield(q) {
					return
				}
			}
		}) {
			gq := StatusGroupQueue{QueueID: q, BrokerOffset: st.MaxOffset(topic, q), ConsumerOffset: qs[q]}
			gq.Lag = max(0, gq.BrokerOffset-gq.ConsumerOffset)
			g.Lag += gq.Lag
			g.Queues = append(g.Queues, gq)
		}
		gs = append(gs, g)
	}
	slices.SortStableFunc(gs, func(a, b StatusGroup) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Topic, b.Topic)
	})
	return ts, gs, truncated
}

// addStatusLists adds the topics, consumer groups and disk limit to a /status record. The
// committed offsets are the table's, overlaid with the offsets still batched for Raft
// (committedOffset) so the page shows what a consumer would be told.
func (b *Broker) addStatusLists(status map[string]any) {
	status["diskMaxUsedSpaceRatio"] = b.cfg.DiskMaxUsedSpaceRatio
	status["security_warnings"] = append([]string{}, b.securityWarnings...) // peerlinks.go
	st, release, err := b.acquireStore()
	if err != nil {
		return // storeError already says why
	}
	defer release()
	w := b.topics.Wrapper()
	topics := make([]*protocol.TopicConfig, 0, len(w.TopicConfigTable))
	for _, tc := range w.TopicConfigTable {
		topics = append(topics, tc)
	}
	committed := b.offsets.Wrapper().OffsetTable
	for k, qs := range committed {
		if topic, group, ok := protocol.SplitOffsetKey(k); ok {
			for q := range qs {
				if off, ok := b.tables.committedOffset(group, topic, q); ok {
					qs[q] = off
				}
			}
		}
	}
	ts, gs, truncated := topicsAndGroups(topics, committed, st, b.statusSystemTopic, statusMaxTopics, statusMaxGroups)
	status["topics"], status["consumerGroups"] = ts, gs
	if truncated {
		status["listsTruncated"] = true
	}
}

// statusSystemTopic says which topics the page hides by default: RocketMQ's system topics, the
// retry and dead-letter topics, and the topics named after the cluster and the broker (which
// brokers create for routing).
func (b *Broker) statusSystemTopic(t string) bool {
	return meta.IsSystemTopic(t) || t == b.cfg.BrokerClusterName || t == b.cfg.BrokerName ||
		strings.HasPrefix(t, "%RETRY%") || strings.HasPrefix(t, "%DLQ%") || strings.HasSuffix(t, "_REPLY_TOPIC")
}

// serveStatusPage writes the embedded page. It is registered for "/{$}" and "/ui" only, so
// unknown paths still answer 404.
func serveStatusPage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", webui.ContentSecurityPolicy)
	_, _ = w.Write(statusPageHTML)
}

// registerStatusPage adds the page's routes to the httpPort mux.
func registerStatusPage(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", serveStatusPage)
	mux.HandleFunc("GET /ui", serveStatusPage)
	webui.Register(mux)
}
