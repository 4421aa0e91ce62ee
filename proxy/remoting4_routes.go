package proxy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// Name server requests of 4.x clients and mqadmin: routes and cluster tables are asked of the
// name servers and rewritten so that each broker group has one member, brokerId 0, at the
// proxy's own address as the client reached it; other name server queries pass through.

// askNamesrv sends req to each name server in turn until one answers.
func (f *front4) askNamesrv(req *remoting.Command) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.SendTimeout)
	defer cancel()
	var errs []error
	for _, ns := range f.cfg.nameServers() {
		resp, err := f.m.cl.Invoke(ctx, ns, clone(req))
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("name server %s: %w", ns, err))
	}
	return nil, errors.Join(errs...)
}

// handleNamesrv passes a name server query through.
func (f *front4) handleNamesrv(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	resp, err := f.askNamesrv(req)
	if err != nil {
		return req.NewResponse(remoting.SystemError, "proxy: no name server answered: "+err.Error())
	}
	return answerOf(req, resp)
}

// proxyAddrs is the broker table of one group as a client of the proxy sees it.
func proxyAddrs(self string) map[int64]string { return map[int64]string{protocol.MasterID: self} }

// handleRoute answers GET_ROUTEINFO_BY_TOPIC with every group at the proxy's address.
func (f *front4) handleRoute(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	resp, err := f.askNamesrv(req)
	if err != nil {
		return req.NewResponse(remoting.SystemError, "proxy: no name server answered: "+err.Error())
	}
	if resp.Code != remoting.Success {
		return answerOf(req, resp)
	}
	var r protocol.TopicRouteData
	if err := protocol.Decode(resp.Body, &r); err != nil {
		return req.NewResponse(remoting.SystemError, "proxy: bad route from the name server: "+err.Error())
	}
	f.m.leaders.observeRoute(&r)
	self := conn.LocalAddr()
	for _, bd := range r.BrokerDatas {
		bd.BrokerAddrs = proxyAddrs(self)
	}
	r.FilterServerTable = nil
	body, err := protocol.Encode(r)
	if err != nil {
		return req.NewResponse(remoting.SystemError, "proxy: encode route: "+err.Error())
	}
	out := answerOf(req, resp)
	out.Body = body
	return out
}

// handleClusterInfo answers GET_BROKER_CLUSTER_INFO with every group at the proxy's address.
func (f *front4) handleClusterInfo(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	resp, err := f.askNamesrv(req)
	if err != nil {
		return req.NewResponse(remoting.SystemError, "proxy: no name server answered: "+err.Error())
	}
	if resp.Code != remoting.Success {
		return answerOf(req, resp)
	}
	var ci protocol.ClusterInfo
	if err := protocol.Decode(resp.Body, &ci); err != nil {
		return req.NewResponse(remoting.SystemError, "proxy: bad cluster table from the name server: "+err.Error())
	}
	self := conn.LocalAddr()
	for _, bd := range ci.BrokerAddrTable {
		bd.BrokerAddrs = proxyAddrs(self)
	}
	body, err := protocol.Encode(ci)
	if err != nil {
		return req.NewResponse(remoting.SystemError, "proxy: encode cluster table: "+err.Error())
	}
	out := answerOf(req, resp)
	out.Body = body
	return out
}

// clusterCache is the cluster's broker groups as the name servers list them, asked again at
// most every clusterTTL: heartbeats and requests naming no group go to every group, or any.
type clusterCache struct {
	cfg     *Config
	cl      *remoting.Client
	leaders *leaderBook
	mu      sync.Mutex
	at      time.Time
	groups  map[string]string // brokerName -> master address in the table ("" when none)
}

const clusterTTL = time.Second

// get returns the group names (sorted) with the master the name servers list for each.
func (c *clusterCache) get(ctx context.Context) ([]string, map[string]string, error) {
	c.mu.Lock()
	if c.groups != nil && time.Since(c.at) < clusterTTL {
		g := c.groups
		c.mu.Unlock()
		return sortedKeys(g), g, nil
	}
	c.mu.Unlock()
	var errs []error
	for _, ns := range c.cfg.nameServers() {
		resp, err := c.cl.Invoke(ctx, ns, remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
		if err == nil && resp.Code != remoting.Success {
			err = fmt.Errorf("code %d %s", resp.Code, resp.Remark)
		}
		var ci protocol.ClusterInfo
		if err == nil {
			err = protocol.Decode(resp.Body, &ci)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("name server %s: %w", ns, err))
			continue
		}
		g := map[string]string{}
		for name, bd := range ci.BrokerAddrTable {
			g[name] = bd.MasterAddr()
		}
		c.mu.Lock()
		c.groups, c.at = g, time.Now()
		c.mu.Unlock()
		return sortedKeys(g), g, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups != nil { // a stale table beats none
		return sortedKeys(c.groups), c.groups, nil
	}
	return nil, nil, fmt.Errorf("broker groups: %w", errors.Join(errs...))
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
