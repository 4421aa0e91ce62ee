package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// Topic and subscription group configs, learned from the brokers: a topic's message.type
// attribute decides which message types QueryRoute offers and SendMessage accepts (fifo.go); a
// group's consumeMessageOrderly makes its consumers FIFO (Telemetry settings, orderly POP). They
// are asked of a member of the topic's route (GET_TOPIC_CONFIG 351, GET_SUBSCRIPTIONGROUP_CONFIG
// 352; every member of a Raft group holds the replicated tables, the master is asked first) and
// refreshed after RouteTTL, as routes are (confMap).

// configCache keeps the configs; its zero value is ready.
type configCache struct {
	topics confMap[*protocol.TopicConfig]
	groups confMap[*protocol.SubscriptionGroupConfig]
}

// confMap caches one kind of config by name. A config older than the TTL is still answered
// while one background lookup refreshes it, so a send or receive never waits for a broker
// once the name is known (a broker that hangs during a failover or a partition cannot slow
// them); only the first lookup of a name waits, bounded by SendTimeout. A failed refresh keeps
// the last value known; a failed first lookup is remembered for one TTL, as "unknown".
type confMap[T any] struct {
	mu sync.Mutex
	m  map[string]confEntry[T]
}

type confEntry[T any] struct {
	v          T // nil: the brokers do not know it
	err        error
	at         time.Time
	refreshing bool
}

// errNoConfig: no broker of the route answered the config request.
var errNoConfig = errors.New("no broker answered")

func (c *confMap[T]) get(ctx context.Context, name string, ttl, timeout time.Duration, fetch func(context.Context) (T, error)) (T, error) {
	c.mu.Lock()
	e, ok := c.m[name]
	if ok {
		if time.Since(e.at) >= ttl && !e.refreshing {
			e.refreshing = true
			c.m[name] = e
			go c.refresh(name, timeout, fetch)
		}
		c.mu.Unlock()
		return e.v, e.err
	}
	c.mu.Unlock()
	fctx, cancel := context.WithTimeout(ctx, timeout)
	v, err := fetch(fctx)
	cancel()
	c.store(name, confEntry[T]{v: v, err: err, at: time.Now()})
	return v, err
}

func (c *confMap[T]) refresh(name string, timeout time.Duration, fetch func(context.Context) (T, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	v, err := fetch(ctx)
	c.mu.Lock()
	old, had := c.m[name]
	c.mu.Unlock()
	if err != nil && had && old.err == nil {
		v, err = old.v, nil // keep what was known; asked again after the TTL
	}
	c.store(name, confEntry[T]{v: v, err: err, at: time.Now()})
}

func (c *confMap[T]) store(name string, e confEntry[T]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]confEntry[T]{}
	}
	c.m[name] = e
}

// topicConfig returns topic's config (nil: the brokers of its route lack it).
func (m *messaging) topicConfig(ctx context.Context, topic string) (*protocol.TopicConfig, error) {
	return m.confs.topics.get(ctx, topic, m.cfg.RouteTTL, m.cfg.SendTimeout, func(ctx context.Context) (*protocol.TopicConfig, error) {
		var tc *protocol.TopicConfig
		err := m.askRoute(ctx, topic, remoting.GetTopicConfig, map[string]string{"topic": topic}, remoting.TopicNotExist, func(body []byte) error {
			tc = &protocol.TopicConfig{}
			return protocol.Decode(body, tc)
		})
		if err != nil {
			return nil, fmt.Errorf("config of topic %s: %w", topic, err)
		}
		return tc, nil
	})
}

// groupConfig returns group's config from a broker of topic's route (nil: they lack it, so it
// has the defaults a broker would create it with).
func (m *messaging) groupConfig(ctx context.Context, group, topic string) (*protocol.SubscriptionGroupConfig, error) {
	return m.confs.groups.get(ctx, group, m.cfg.RouteTTL, m.cfg.SendTimeout, func(ctx context.Context) (*protocol.SubscriptionGroupConfig, error) {
		var gc *protocol.SubscriptionGroupConfig
		err := m.askRoute(ctx, topic, remoting.GetSubscriptionGroupConfig, map[string]string{"group": group}, remoting.SubscriptionGroupNotExist, func(body []byte) error {
			gc = protocol.NewSubscriptionGroupConfig(group)
			return protocol.Decode(body, gc)
		})
		if err != nil {
			return nil, fmt.Errorf("config of group %s: %w", group, err)
		}
		return gc, nil
	})
}

// orderly reports whether group consumes orderly (false when its config cannot be read: the
// consumer then gets unordered POP, never an error).
func (m *messaging) orderly(ctx context.Context, group, topic string) bool {
	gc, err := m.groupConfig(ctx, group, topic)
	if err != nil {
		m.log.Debug("group config unknown; consuming unordered", "group", group, "error", err)
	}
	return gc != nil && gc.ConsumeMessageOrderly
}

// askRoute sends one request to the members of topic's route, masters first, until one
// answers SUCCESS (decode reads its body) or notFound (nil error, decode not called).
func (m *messaging) askRoute(ctx context.Context, topic string, code int32, ext map[string]string, notFound int32, decode func([]byte) error) error {
	r, err := m.routes.get(ctx, topic)
	if err != nil {
		return err
	}
	var addrs []string
	for _, bd := range r.BrokerDatas {
		if a := bd.MasterAddr(); a != "" {
			addrs = append(addrs, a)
		}
	}
	for _, bd := range r.BrokerDatas {
		for _, a := range bd.BrokerAddrs {
			if a != bd.MasterAddr() {
				addrs = append(addrs, a)
			}
		}
	}
	errs := []error{errNoConfig}
	for _, addr := range addrs {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		resp, err := m.cl.Invoke(ctx, addr, remoting.NewRequest(code, ext, nil))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		case resp.Code == remoting.Success:
			if err := decode(resp.Body); err != nil {
				return fmt.Errorf("%s: decode: %w", addr, err)
			}
			return nil
		case resp.Code == notFound:
			return nil
		default:
			errs = append(errs, fmt.Errorf("%s: code %d %s", addr, resp.Code, resp.Remark))
		}
	}
	return errors.Join(errs...)
}
