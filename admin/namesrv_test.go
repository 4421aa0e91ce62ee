package admin

import (
	"context"
	"strings"
	"testing"
	"time"

	"rocketraft/namesrv"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// TestAgainstRealNameServer drives the project's own name server in process, with a fake broker
// registered in it, so the commands are checked against the real route and cluster bodies.
func TestAgainstRealNameServer(t *testing.T) {
	ns, err := namesrv.New(namesrv.Config{ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	broker := startPeer(t, brokerHandlers(&brokerState{runtime: map[string]string{"brokerVersionDesc": "V4_9_4", "brokerRole": "ASYNC_MASTER"}}))

	hdr := protocol.RegisterBrokerRequestHeader{BrokerName: "broker-a", BrokerAddr: broker.addr(), ClusterName: "DefaultCluster",
		HaServerAddr: "127.0.0.1:1", BrokerID: 0}
	body := protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: protocol.TopicConfigSerializeWrapper{
		TopicConfigTable: map[string]*protocol.TopicConfig{"T1": {TopicName: "T1", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6, TopicFilterType: "SINGLE_TAG"}},
		DataVersion:      protocol.DataVersion{Counter: 1, Timestamp: 1},
	}}
	cl := remoting.NewClient(remoting.ClientConfig{})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, ns.Addr(), remoting.NewRequest(remoting.RegisterBroker, hdr.ToExt(), protocol.MustEncode(body)))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("register: %v %+v", err, resp)
	}

	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := runMain(append(args, "-n", ns.Addr())...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	// row returns the fields of the output line mentioning the broker's address.
	row := func(out string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, broker.addr()) {
				return strings.Join(strings.Fields(strings.ReplaceAll(l, broker.addr(), "B")), " ")
			}
		}
		return ""
	}
	if got, want := run("topicList"), "T1\n"; got != want {
		t.Fatalf("topicList %q", got)
	}
	if got := run("topicRoute", "-t", "T1"); row(got) != "DefaultCluster broker-a 0 B 2 2 RW-" {
		t.Fatalf("topicRoute:\n%s", got)
	}
	if got := run("clusterList"); row(got) != "DefaultCluster broker-a 0 B V4_9_4 - - - - - ASYNC_MASTER" {
		t.Fatalf("clusterList:\n%s", got)
	}
	run("updateTopic", "-t", "T2", "-c", "DefaultCluster", "--order", "-w", "3")
	if v, ok := ns.KV().Get(protocol.OrderTopicConfigNamespace, "T2"); !ok || v != "broker-a:3" {
		t.Fatalf("order conf %q %v", v, ok)
	}
	if got := run("deleteTopic", "-t", "T1", "-c", "DefaultCluster"); !strings.Contains(got, "delete topic [T1] from NameServer success.") {
		t.Fatalf("deleteTopic:\n%s", got)
	}
	_, errOut, code := runMain("topicRoute", "-t", "T1", "-n", ns.Addr())
	if code != 1 || !strings.Contains(errOut, "answered code 17") {
		t.Fatalf("route after delete: exit %d, %s", code, errOut)
	}
}
