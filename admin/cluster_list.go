package admin

// clusterList: GET_BROKER_CLUSTER_INFO (106), then GET_BROKER_RUNTIME_INFO (28) to every broker
// address, one row per broker as Java's ClusterListSubCommand. The TPS columns come from Java's
// putTps / getTransferedTps keys ("10s 60s 600s" averages) when a broker reports them, else "-".
// An unreachable broker is shown as UNREACHABLE with a warning on stderr and does not fail the
// command.

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// unreachable marks a broker whose runtime info could not be fetched.
const unreachable = "UNREACHABLE"

// firstTps renders the first number of a Java "x y z" TPS value with two decimals, or "-".
func firstTps(v string) string {
	f := strings.Fields(v)
	if len(f) == 0 {
		return "-"
	}
	n, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", n)
}

func orDash(m map[string]string, key string) string {
	if v, ok := m[key]; ok && v != "" {
		return v
	}
	return "-"
}

var clusterListCommand = &command{
	name:    "clusterList",
	summary: "List the brokers of every cluster (or of one) with their runtime figures",
	args:    "[-c <cluster>]",
	setup: func(fs *pflag.FlagSet) func(context.Context, *Tool) error {
		var cluster string
		fs.StringVarP(&cluster, "clusterName", "c", "", "only this cluster")
		return func(ctx context.Context, t *Tool) error {
			all, err := t.ClusterRuntimeInfo(ctx, cluster)
			if err != nil {
				return err
			}
			for _, s := range all {
				if s.Error != "" {
					t.warnf("broker %s (%s, id %d) is unreachable: %s", s.Addr, s.BrokerName, s.ID, s.Error)
				}
			}
			if t.jsonOut() {
				if all == nil {
					all = []BrokerStatus{}
				}
				return t.printJSON(all)
			}
			tb := newTable("#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)",
				"#InTotalToday", "#OutTotalToday", "#CommitLogMaxOffset", "#Role")
			for _, s := range all {
				if s.Error != "" {
					tb.add(s.Cluster, s.BrokerName, s.ID, s.Addr, unreachable, "-", "-", "-", "-", "-", "-")
					continue
				}
				m := s.Table
				tb.add(s.Cluster, s.BrokerName, s.ID, s.Addr, orDash(m, "brokerVersionDesc"), firstTps(m["putTps"]),
					firstTps(m["getTransferedTps"]), orDash(m, "msgPutTotalTodayNow"), orDash(m, "msgGetTotalTodayNow"),
					orDash(m, "commitLogMaxOffset"), orDash(m, "brokerRole"))
			}
			return tb.write(t.cfg.Out)
		}
	},
}
