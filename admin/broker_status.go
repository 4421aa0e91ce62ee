package admin

// brokerStatus: GET_BROKER_RUNTIME_INFO (28) to one broker (-b) or to every member of a cluster
// (-c), printed as sorted "key : value" lines like Java's BrokerStatusSubCommand. In cluster mode
// an unreachable broker is reported and the others are still shown; the exit status is then 1.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/pflag"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// BrokerRuntimeInfo fetches the runtime KV table of the broker at addr.
func (t *Tool) BrokerRuntimeInfo(ctx context.Context, addr string) (map[string]string, error) {
	resp, err := t.call(ctx, addr, remoting.GetBrokerRuntimeInfo, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("get runtime info: %w", err)
	}
	var kv protocol.KVTable
	if err := protocol.Decode(resp.Body, &kv); err != nil {
		return nil, fmt.Errorf("decode runtime info from %s: %w", addr, err)
	}
	if kv.Table == nil {
		kv.Table = map[string]string{}
	}
	return kv.Table, nil
}

// BrokerStatus is one broker's runtime table, or why it could not be had.
type BrokerStatus struct {
	BrokerAddr
	Table map[string]string `json:"table,omitempty"`
	Error string            `json:"error,omitempty"`
}

// ClusterRuntimeInfo fetches the runtime table of every member of cluster ("" for all clusters),
// concurrently, in ClusterBrokers order. Failures are recorded per broker, not returned.
func (t *Tool) ClusterRuntimeInfo(ctx context.Context, cluster string) ([]BrokerStatus, error) {
	ci, err := t.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	brokers, err := ClusterBrokers(ci, cluster, false)
	if err != nil {
		return nil, err
	}
	out := make([]BrokerStatus, len(brokers))
	done := make(chan struct{})
	for i, b := range brokers {
		go func() {
			defer func() { done <- struct{}{} }()
			out[i].BrokerAddr = b
			table, err := t.BrokerRuntimeInfo(ctx, b.Addr)
			if err != nil {
				out[i].Error = err.Error()
				return
			}
			out[i].Table = table
		}()
	}
	for range brokers {
		<-done
	}
	return out, nil
}

var brokerStatusCommand = &command{
	name:    "brokerStatus",
	summary: "Show a broker's runtime statistics",
	args:    "(-b <brokerAddr> | -c <cluster>)",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var broker, cluster string
		fs.StringVarP(&broker, "brokerAddr", "b", "", "broker address (host:port)")
		fs.StringVarP(&cluster, "clusterName", "c", "", "every broker of this cluster")
		return func(ctx context.Context, t *Tool) error {
			if (cluster == "") == (broker == "") {
				return usagef("give exactly one of -b/--brokerAddr and -c/--clusterName")
			}
			if broker != "" {
				table, err := t.BrokerRuntimeInfo(ctx, broker)
				if err != nil {
					return err
				}
				if t.jsonOut() {
					return t.printJSON(table)
				}
				for _, k := range slices.Sorted(maps.Keys(table)) {
					t.printf("%-32s: %s\n", k, table[k])
				}
				return nil
			}
			all, err := t.ClusterRuntimeInfo(ctx, cluster)
			if err != nil {
				return err
			}
			var errs []error
			for _, s := range all {
				if s.Error != "" {
					errs = append(errs, fmt.Errorf("%s (%s): %s", s.Addr, s.BrokerName, s.Error))
				}
			}
			if t.jsonOut() {
				if perr := t.printJSON(all); perr != nil {
					return perr
				}
				return errors.Join(errs...)
			}
			for _, s := range all {
				if s.Error != "" {
					t.warnf("%s: %s", s.Addr, s.Error)
					continue
				}
				for _, k := range slices.Sorted(maps.Keys(s.Table)) {
					t.printf("%-24s %-32s: %s\n", s.Addr, k, s.Table[k])
				}
			}
			return errors.Join(errs...)
		}
	},
}
