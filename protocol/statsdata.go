package protocol

// Stats names VIEW_BROKER_STATS_DATA (315) answers for, as RocketMQ's BrokerStatsManager names
// them: a topic's stored messages (key: the topic) and a group's consumption of a topic (key:
// topic@group).
const (
	StatsTopicPutNums = "TOPIC_PUT_NUMS"
	StatsGroupGetNums = "GROUP_GET_NUMS"
)

// BrokerStatsItem is one window of a BrokerStatsData: how many in the window, per second, and
// the average time per call (ms; 0 here, the broker does not time them).
type BrokerStatsItem struct {
	Sum   int64   `json:"sum"`
	Tps   float64 `json:"tps"`
	Avgpt float64 `json:"avgpt"`
}

// BrokerStatsData is the body of VIEW_BROKER_STATS_DATA's answer: the figures of one stats
// key over the last minute, hour and day.
type BrokerStatsData struct {
	StatsMinute BrokerStatsItem `json:"statsMinute"`
	StatsHour   BrokerStatsItem `json:"statsHour"`
	StatsDay    BrokerStatsItem `json:"statsDay"`
}
