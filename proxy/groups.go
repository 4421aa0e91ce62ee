package proxy

import (
	"encoding/json"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"rocketraft/protocol"
	"rocketraft/proxy/rmqpb"
)

// Consumer groups' retry settings live in the brokers' subscription group configs (read and
// cached by groupConfig, configs.go). From a group's config the proxy takes what the 5.x
// consumers must be told: how many deliveries a message gets before it goes to the group's dead
// letter queue, and the backoff between them.

// maxAttempts is how many times a message of the group is delivered before it goes to the
// group's dead letter queue: its retryMaxTimes plus the first delivery.
// A nil config (the brokers do not know the group yet) has the defaults a broker creates it with.
func maxAttempts(gc *protocol.SubscriptionGroupConfig) int32 {
	if gc == nil {
		gc = protocol.NewSubscriptionGroupConfig("")
	}
	return max(gc.RetryMaxTimes, 0) + 1
}

// defaultRetryNext is the brokers' default customized retry policy: the delay levels after the
// first (1 s .. 2 h).
var defaultRetryNext = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute, 6 * time.Minute,
	7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour,
}

// groupRetryPolicy is the group's groupRetryPolicy attribute as RocketMQ 5 brokers keep it.
type groupRetryPolicy struct {
	Type              string `json:"type"`
	ExponentialPolicy *struct {
		Initial    int64   `json:"initial"`
		Max        int64   `json:"max"`
		Multiplier float32 `json:"multiplier"`
	} `json:"exponentialRetryPolicy"`
	CustomizedPolicy *struct {
		Next []int64 `json:"next"`
	} `json:"customizedRetryPolicy"`
}

// backoffPolicy is the retry policy a push consumer of the group is told: maxAttempts, and the
// group's exponential policy if it has one, else its customized delays (the default levels).
func backoffPolicy(gc *protocol.SubscriptionGroupConfig) *rmqpb.RetryPolicy {
	if gc == nil {
		gc = protocol.NewSubscriptionGroupConfig("")
	}
	rp := &rmqpb.RetryPolicy{MaxAttempts: maxAttempts(gc)}
	var p groupRetryPolicy
	if len(gc.GroupRetryPolicy) > 0 {
		_ = json.Unmarshal(gc.GroupRetryPolicy, &p) // unreadable: the default policy
	}
	if p.Type == "EXPONENTIAL" {
		e := p.ExponentialPolicy
		initial, maxDelay, mult := int64(5000), int64(7200000), float32(2) // the brokers' defaults
		if e != nil {
			initial, maxDelay, mult = e.Initial, e.Max, e.Multiplier
		}
		rp.Strategy = &rmqpb.RetryPolicy_ExponentialBackoff{ExponentialBackoff: &rmqpb.ExponentialBackoff{
			Initial: durationpb.New(time.Duration(initial) * time.Millisecond), Max: durationpb.New(time.Duration(maxDelay) * time.Millisecond), Multiplier: mult,
		}}
		return rp
	}
	next := defaultRetryNext
	if c := p.CustomizedPolicy; c != nil && len(c.Next) > 0 {
		next = make([]time.Duration, len(c.Next))
		for i, ms := range c.Next {
			next[i] = time.Duration(ms) * time.Millisecond
		}
	}
	cb := &rmqpb.CustomizedBackoff{}
	for _, d := range next {
		cb.Next = append(cb.Next, durationpb.New(d))
	}
	rp.Strategy = &rmqpb.RetryPolicy_CustomizedBackoff{CustomizedBackoff: cb}
	return rp
}
