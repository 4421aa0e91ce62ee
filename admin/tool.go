package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"rocketraft/acl"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// DefaultTimeout bounds each remote call when Config.Timeout is zero (Java's mqClientApiTimeout).
const DefaultTimeout = 3 * time.Second

// Output formats accepted by Config.Format and -o.
const (
	FormatTable = "table"
	FormatJSON  = "json"
)

// Config configures a Tool.
type Config struct {
	// NamesrvAddrs are the name servers, tried in order.
	NamesrvAddrs []string
	// Timeout bounds every remote call; 0 means DefaultTimeout.
	Timeout time.Duration
	// Format is FormatTable (default) or FormatJSON.
	Format string
	// Out receives results, Err warnings; nil discards.
	Out, Err io.Writer
	// Location renders timestamps in tables; nil means time.Local.
	Location *time.Location
	// AccessKey and SecretKey sign every request (brokers and name servers with aclEnable);
	// empty means unsigned. Admin commands need an admin account.
	AccessKey, SecretKey string
	// TLS connects to name servers and brokers over TLS without verifying their certificates,
	// as RocketMQ's tools do with tls.enable (for ports with tls.server.mode on).
	TLS bool
}

// Tool runs admin commands against name servers and brokers.
type Tool struct {
	cfg    Config
	client *remoting.Client
}

// New returns a Tool with its own remoting client; Close it when done.
func New(cfg Config) *Tool {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Format == "" {
		cfg.Format = FormatTable
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Err == nil {
		cfg.Err = io.Discard
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	cc := remoting.ClientConfig{DialTimeout: cfg.Timeout}
	if cfg.TLS {
		cc.TLS, _ = remoting.NewClientTLS(false, "") // without a trust file it cannot fail
	}
	if cfg.AccessKey != "" {
		cc.BeforeRequest = func(req *remoting.Command) {
			acl.Sign(req.Fields(), req.Body, cfg.AccessKey, cfg.SecretKey)
		}
	}
	return &Tool{cfg: cfg, client: remoting.NewClient(cc)}
}

// Close drops every connection.
func (t *Tool) Close() error { return t.client.Close() }

// ParseNamesrvAddrs splits RocketMQ's "host:port;host:port" list, dropping blanks.
func ParseNamesrvAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ";") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// invoke sends one request to addr, bounded by the configured timeout.
func (t *Tool) invoke(ctx context.Context, addr string, req *remoting.Command) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	resp, err := t.client.Invoke(ctx, addr, req)
	if err != nil {
		// A timed-out or broken connection is not reused.
		t.client.CloseAddr(addr)
		return nil, fmt.Errorf("call %s: %w", addr, err)
	}
	return resp, nil
}

// call is invoke that turns a non-SUCCESS answer into a *ResponseError.
func (t *Tool) call(ctx context.Context, addr string, code int32, ext map[string]string, body []byte) (*remoting.Command, error) {
	resp, err := t.invoke(ctx, addr, remoting.NewRequest(code, ext, body))
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.Success {
		return resp, &ResponseError{Addr: addr, Code: resp.Code, Remark: resp.Remark}
	}
	return resp, nil
}

// callNamesrv asks the name servers in order and returns the first answer. Only a transport
// failure moves on to the next server; an error code is an answer and is returned as it is.
func (t *Tool) callNamesrv(ctx context.Context, code int32, ext map[string]string) (*remoting.Command, error) {
	if len(t.cfg.NamesrvAddrs) == 0 {
		return nil, ErrNoNameServer
	}
	var errs []error
	for _, addr := range t.cfg.NamesrvAddrs {
		resp, err := t.invoke(ctx, addr, remoting.NewRequest(code, ext, nil))
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if resp.Code != remoting.Success {
			return resp, &ResponseError{Addr: addr, Code: resp.Code, Remark: resp.Remark}
		}
		return resp, nil
	}
	return nil, fmt.Errorf("no name server answered: %w", errors.Join(errs...))
}

// eachNamesrv sends the request to every name server and joins the failures.
func (t *Tool) eachNamesrv(ctx context.Context, code int32, ext map[string]string) error {
	if len(t.cfg.NamesrvAddrs) == 0 {
		return ErrNoNameServer
	}
	var errs []error
	for _, addr := range t.cfg.NamesrvAddrs {
		if _, err := t.call(ctx, addr, code, ext, nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ClusterInfo fetches GET_BROKER_CLUSTER_INFO from the first name server that answers.
func (t *Tool) ClusterInfo(ctx context.Context) (*protocol.ClusterInfo, error) {
	resp, err := t.callNamesrv(ctx, remoting.GetBrokerClusterInfo, nil)
	if err != nil {
		return nil, fmt.Errorf("get cluster info: %w", err)
	}
	var ci protocol.ClusterInfo
	if err := protocol.Decode(resp.Body, &ci); err != nil {
		return nil, fmt.Errorf("decode cluster info: %w", err)
	}
	return &ci, nil
}

// TopicRoute fetches GET_ROUTEINFO_BY_TOPIC for topic, sorted by broker name.
func (t *Tool) TopicRoute(ctx context.Context, topic string) (*protocol.TopicRouteData, error) {
	resp, err := t.callNamesrv(ctx, remoting.GetRouteInfoByTopic, map[string]string{"topic": topic})
	if err != nil {
		return nil, fmt.Errorf("get route of topic %s: %w", topic, err)
	}
	var rd protocol.TopicRouteData
	if err := protocol.Decode(resp.Body, &rd); err != nil {
		return nil, fmt.Errorf("decode route of topic %s: %w", topic, err)
	}
	rd.Sort()
	return &rd, nil
}

// BrokerAddr is one member of a replica group.
type BrokerAddr struct {
	Cluster    string `json:"cluster"`
	BrokerName string `json:"brokerName"`
	ID         int64  `json:"brokerId"`
	Addr       string `json:"addr"`
}

func compareBrokerAddr(a, b BrokerAddr) int {
	return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.BrokerName, b.BrokerName), cmp.Compare(a.ID, b.ID))
}

// members lists the addresses of bd, masters only or all, ordered by broker id.
func members(bd *protocol.BrokerData, mastersOnly bool) []BrokerAddr {
	var out []BrokerAddr
	for _, id := range slices.Sorted(maps.Keys(bd.BrokerAddrs)) {
		if mastersOnly && id != protocol.MasterID {
			continue
		}
		out = append(out, BrokerAddr{Cluster: bd.Cluster, BrokerName: bd.BrokerName, ID: id, Addr: bd.BrokerAddrs[id]})
	}
	return out
}

// ClusterBrokers lists the brokers of cluster (every cluster when cluster is ""), masters only or
// all members, sorted by cluster, broker name and id. An unknown cluster is ErrClusterNotFound.
func ClusterBrokers(ci *protocol.ClusterInfo, cluster string, mastersOnly bool) ([]BrokerAddr, error) {
	clusters := slices.Sorted(maps.Keys(ci.ClusterAddrTable))
	if cluster != "" {
		if _, ok := ci.ClusterAddrTable[cluster]; !ok {
			return nil, fmt.Errorf("%w: %q (known: %s)", ErrClusterNotFound, cluster, strings.Join(clusters, ", "))
		}
		clusters = []string{cluster}
	}
	var out []BrokerAddr
	for _, c := range clusters {
		for _, name := range ci.ClusterAddrTable[c] {
			bd := ci.BrokerAddrTable[name]
			if bd == nil {
				continue
			}
			for _, m := range members(bd, mastersOnly) {
				m.Cluster = c
				out = append(out, m)
			}
		}
	}
	slices.SortFunc(out, compareBrokerAddr)
	return out, nil
}

// RouteMasters lists the master of every broker name in the route that has one.
func RouteMasters(rd *protocol.TopicRouteData) []BrokerAddr {
	var out []BrokerAddr
	for _, bd := range rd.BrokerDatas {
		out = append(out, members(bd, true)...)
	}
	slices.SortFunc(out, compareBrokerAddr)
	return out
}

// brokerReply is one broker's answer to a fan-out call.
type brokerReply struct {
	Broker BrokerAddr
	Resp   *remoting.Command
	Err    error
}

// callBrokers sends the same request to each broker in turn and returns every reply.
func (t *Tool) callBrokers(ctx context.Context, brokers []BrokerAddr, code int32, ext map[string]string, body []byte) []brokerReply {
	out := make([]brokerReply, 0, len(brokers))
	for _, b := range brokers {
		resp, err := t.call(ctx, b.Addr, code, ext, body)
		out = append(out, brokerReply{Broker: b, Resp: resp, Err: err})
	}
	return out
}

// callMasters sends the request to every master of cluster (all clusters when "").
func (t *Tool) callMasters(ctx context.Context, cluster string, code int32, ext map[string]string, body []byte) ([]brokerReply, error) {
	ci, err := t.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	masters, err := ClusterBrokers(ci, cluster, true)
	if err != nil {
		return nil, err
	}
	if len(masters) == 0 {
		return nil, fmt.Errorf("%w in cluster %q", ErrNoMaster, cluster)
	}
	return t.callBrokers(ctx, masters, code, ext, body), nil
}

// replyErrors joins the failures of a fan-out, each prefixed with the broker name.
func replyErrors(replies []brokerReply) error {
	var errs []error
	for _, r := range replies {
		switch {
		case r.Err == nil:
		case r.Broker.BrokerName == "":
			errs = append(errs, r.Err)
		default:
			errs = append(errs, fmt.Errorf("%s: %w", r.Broker.BrokerName, r.Err))
		}
	}
	return errors.Join(errs...)
}

// warnf writes one warning line to the Err writer.
func (t *Tool) warnf(format string, a ...any) {
	fmt.Fprintf(t.cfg.Err, "warning: "+format+"\n", a...)
}
