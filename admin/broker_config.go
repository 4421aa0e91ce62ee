package admin

// getBrokerConfig and updateBrokerConfig, as Java's GetBrokerConfigCommand and
// UpdateBrokerConfigSubCommand: -b one broker or -c every member of a cluster (each node of a
// DLedger group keeps its own runtime config, so all members, not only masters).
//
// getBrokerConfig sends GET_BROKER_CONFIG (26); the body is properties text, printed as Java
// does ("key  =  value", under a "====addr====" banner per broker), secrets already redacted by
// the broker. updateBrokerConfig sends UPDATE_BROKER_CONFIG (25) with "key=value" as the body;
// the broker accepts only its allow-listed runtime keys and its refusal is printed as it is.

import (
	"context"
	"errors"
	"fmt"

	"github.com/magiconair/properties"
	"github.com/spf13/pflag"

	"rocketraft/remoting"
)

// ConfigEntry is one key of a broker's configuration.
type ConfigEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// BrokerConfig fetches the configuration of the broker at addr, in the broker's key order.
func (t *Tool) BrokerConfig(ctx context.Context, addr string) ([]ConfigEntry, error) {
	resp, err := t.call(ctx, addr, remoting.GetBrokerConfig, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("get broker config: %w", err)
	}
	p, err := (&properties.Loader{Encoding: properties.UTF8, DisableExpansion: true}).LoadBytes(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("decode broker config from %s: %w", addr, err)
	}
	out := make([]ConfigEntry, 0, p.Len())
	for _, k := range p.Keys() { // Keys keeps the order of the text
		v, _ := p.Get(k)
		out = append(out, ConfigEntry{k, v})
	}
	return out, nil
}

// UpdateBrokerConfig sets key to value on the broker at addr (UPDATE_BROKER_CONFIG).
func (t *Tool) UpdateBrokerConfig(ctx context.Context, addr, key, value string) error {
	body := properties.NewProperties()
	body.DisableExpansion = true
	if _, _, err := body.Set(key, value); err != nil {
		return usagef("-k %s -v %s: %v", key, value, err)
	}
	if _, err := t.call(ctx, addr, remoting.UpdateBrokerConfig, nil, []byte(body.String())); err != nil {
		return fmt.Errorf("update broker config %s=%s: %w", key, value, err)
	}
	return nil
}

// brokerTargets resolves -b/-c to addresses: the one broker, or every member of the cluster.
func (t *Tool) brokerTargets(ctx context.Context, broker, cluster string) ([]BrokerAddr, error) {
	if (cluster == "") == (broker == "") {
		return nil, usagef("give exactly one of -b/--brokerAddr and -c/--clusterName")
	}
	if broker != "" {
		return []BrokerAddr{{Addr: broker}}, nil
	}
	ci, err := t.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	return ClusterBrokers(ci, cluster, false)
}

// BrokerConfigResult is one broker's configuration, or why it could not be had.
type BrokerConfigResult struct {
	BrokerAddr
	Config []ConfigEntry `json:"config,omitempty"`
	Error  string        `json:"error,omitempty"`
}

var getBrokerConfigCommand = &command{
	name:    "getBrokerConfig",
	summary: "Show a broker's configuration (secrets redacted)",
	args:    "(-b <brokerAddr> | -c <cluster>)",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var broker, cluster string
		fs.StringVarP(&broker, "brokerAddr", "b", "", "broker address (host:port)")
		fs.StringVarP(&cluster, "clusterName", "c", "", "every broker of this cluster")
		return func(ctx context.Context, t *Tool) error {
			targets, err := t.brokerTargets(ctx, broker, cluster)
			if err != nil {
				return err
			}
			results := make([]BrokerConfigResult, len(targets))
			var errs []error
			for i, b := range targets {
				results[i].BrokerAddr = b
				cfg, err := t.BrokerConfig(ctx, b.Addr)
				if err != nil {
					results[i].Error = err.Error()
					errs = append(errs, err)
					continue
				}
				results[i].Config = cfg
			}
			if t.jsonOut() {
				if broker != "" && len(errs) == 0 {
					return t.printJSON(results[0].Config)
				}
				if err := t.printJSON(results); err != nil {
					return err
				}
				return errors.Join(errs...)
			}
			for _, r := range results {
				if r.Error != "" {
					t.warnf("%s: %s", r.Addr, r.Error)
					continue
				}
				t.printf("============%s============\n", r.Addr)
				for _, e := range r.Config {
					t.printf("%-50s=  %s\n", e.Key, e.Value)
				}
			}
			return errors.Join(errs...)
		}
	},
}

var updateBrokerConfigCommand = &command{
	name:    "updateBrokerConfig",
	summary: "Change a runtime key of a broker's configuration",
	args:    "(-b <brokerAddr> | -c <cluster>) -k <key> -v <value>",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var broker, cluster, key, value string
		fs.StringVarP(&broker, "brokerAddr", "b", "", "broker address (host:port)")
		fs.StringVarP(&cluster, "clusterName", "c", "", "every broker of this cluster")
		fs.StringVarP(&key, "key", "k", "", "config key (brokerPermission, logLevel or slaveReadEnable)")
		fs.StringVarP(&value, "value", "v", "", "new value")
		return func(ctx context.Context, t *Tool) error {
			if err := required(fs, "key", "value"); err != nil {
				return err
			}
			targets, err := t.brokerTargets(ctx, broker, cluster)
			if err != nil {
				return err
			}
			type result struct {
				Addr  string `json:"brokerAddr"`
				OK    bool   `json:"ok"`
				Error string `json:"error,omitempty"`
			}
			var results []result
			var errs []error
			for _, b := range targets {
				if err := t.UpdateBrokerConfig(ctx, b.Addr, key, value); err != nil {
					errs = append(errs, err)
					results = append(results, result{Addr: b.Addr, Error: err.Error()})
					if !t.jsonOut() {
						t.printf("update broker config failed, %s: %v\n", b.Addr, err)
					}
					continue
				}
				results = append(results, result{Addr: b.Addr, OK: true})
				if !t.jsonOut() {
					t.printf("update broker config success, %s\n", b.Addr)
				}
			}
			if t.jsonOut() {
				if err := t.printJSON(results); err != nil {
					return err
				}
			}
			return errors.Join(errs...)
		}
	},
}
