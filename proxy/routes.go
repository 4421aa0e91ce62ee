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

// routeCache keeps each topic's route from the name servers for a short time, so that a group's
// new leader is learned within RouteTTL, or at once after a failed send (invalidate).
type routeCache struct {
	cfg *Config
	cl  *remoting.Client
	mu  sync.Mutex
	m   map[string]cachedRoute
}

type cachedRoute struct {
	r  *protocol.TopicRouteData
	at time.Time
}

// errNoRoute: no name server knows the topic.
var errNoRoute = errors.New("topic not found")

func newRouteCache(cfg *Config, cl *remoting.Client) *routeCache {
	return &routeCache{cfg: cfg, cl: cl, m: map[string]cachedRoute{}}
}

// get returns topic's route, asking the name servers if the cached one is older than RouteTTL.
func (c *routeCache) get(ctx context.Context, topic string) (*protocol.TopicRouteData, error) {
	c.mu.Lock()
	e, ok := c.m[topic]
	c.mu.Unlock()
	if ok && time.Since(e.at) < c.cfg.RouteTTL {
		return e.r, nil
	}
	r, err := c.fetch(ctx, topic)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.m[topic] = cachedRoute{r: r, at: time.Now()}
	c.mu.Unlock()
	return r, nil
}

// routeMaster is the master address of group brokerName in r ("": the first group with a
// master), or "" when the route names none.
func routeMaster(r *protocol.TopicRouteData, brokerName string) string {
	for _, bd := range r.BrokerDatas {
		if bd.BrokerName == brokerName || brokerName == "" {
			if a := bd.MasterAddr(); a != "" {
				return a
			}
		}
	}
	return ""
}

// invalidate forgets topic's route: the next get asks again.
func (c *routeCache) invalidate(topic string) {
	c.mu.Lock()
	delete(c.m, topic)
	c.mu.Unlock()
}

// fetch asks each name server in turn for topic's route.
func (c *routeCache) fetch(ctx context.Context, topic string) (*protocol.TopicRouteData, error) {
	var errs []error
	for _, ns := range c.cfg.nameServers() {
		req := remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
		resp, err := c.cl.Invoke(ctx, ns, req)
		if err != nil {
			errs = append(errs, fmt.Errorf("name server %s: %w", ns, err))
			continue
		}
		if resp.Code == remoting.TopicNotExist {
			return nil, fmt.Errorf("%w: %s", errNoRoute, topic)
		}
		if resp.Code != remoting.Success {
			errs = append(errs, fmt.Errorf("name server %s: code %d %s", ns, resp.Code, resp.Remark))
			continue
		}
		var r protocol.TopicRouteData
		if err := protocol.Decode(resp.Body, &r); err != nil {
			errs = append(errs, fmt.Errorf("name server %s: route of %s: %w", ns, topic, err))
			continue
		}
		return &r, nil
	}
	return nil, fmt.Errorf("route of %s: %w", topic, errors.Join(errs...))
}
