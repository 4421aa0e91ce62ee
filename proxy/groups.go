package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"rocketraft/protocol"
	"rocketraft/proxy/rmqpb"
	"rocketraft/remoting"
)

// Consumer groups' retry settings live in the brokers' subscription group tables. The proxy reads
// a broker's table (GET_ALL_SUBSCRIPTIONGROUP_CONFIG) at most once per RouteTTL and takes from it
// what the 5.x consumers must be told: how many deliveries a message gets before it goes to the
// group's dead letter queue, and the backoff between them.

// groupTables caches each broker's subscription group table by broker address.
type groupTables struct {
	mu sync.Mutex
	m  map[string]cachedGroups
}

type cachedGroups struct {
	t  map[string]*protocol.SubscriptionGroupConfig
	at time.Time
}

// groupConfig is group's config on the broker at addr, or the brokers' defaults for a group the
// broker does not know yet (it creates groups on first use) or cannot be asked.
func (m *messaging) groupConfig(ctx context.Context, addr, group string) *protocol.SubscriptionGroupConfig {
	if gc := m.groupTable(ctx, addr)[group]; gc != nil {
		return gc
	}
	return protocol.NewSubscriptionGroupConfig(group)
}

// groupTable is the broker's group table, nil when it cannot be read (the caller uses defaults).
func (m *messaging) groupTable(ctx context.Context, addr string) map[string]*protocol.SubscriptionGroupConfig {
	c := &m.groups
	c.mu.Lock()
	e, ok := c.m[addr]
	c.mu.Unlock()
	if ok && time.Since(e.at) < m.cfg.RouteTTL {
		return e.t
	}
	t, err := m.fetchGroupTable(ctx, addr)
	if err != nil {
		m.log.Debug("subscription group table not read: defaults apply", "broker", addr, "error", err)
		return e.t // the last one read, if any
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]cachedGroups{}
	}
	c.m[addr] = cachedGroups{t: t, at: time.Now()}
	c.mu.Unlock()
	return t
}

func (m *messaging) fetchGroupTable(ctx context.Context, addr string) (map[string]*protocol.SubscriptionGroupConfig, error) {
	sctx, cancel := context.WithTimeout(ctx, m.cfg.SendTimeout)
	defer cancel()
	r, err := m.cl.Invoke(sctx, addr, remoting.NewRequest(remoting.GetAllSubscriptionGroupConfig, nil, nil))
	if err != nil {
		return nil, fmt.Errorf("group table of %s: %w", addr, err)
	}
	if r.Code != remoting.Success {
		return nil, fmt.Errorf("group table of %s: code %d %s", addr, r.Code, r.Remark)
	}
	var w protocol.SubscriptionGroupWrapper
	if err := json.Unmarshal(r.Body, &w); err != nil {
		return nil, fmt.Errorf("group table of %s: %w", addr, err)
	}
	return w.SubscriptionGroupTable, nil
}

// maxAttempts is how many times a message of the group is delivered before it goes to the
// group's dead letter queue: its retryMaxTimes plus the first delivery.
func maxAttempts(gc *protocol.SubscriptionGroupConfig) int32 {
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
