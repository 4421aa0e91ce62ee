package integration

import (
	"testing"
	"time"
)

// TestNamesrvRefusesTakeoverWithoutACL replays the security review's finding "with ACL off anyone can
// register a fake broker and redirect routes, unregister every broker": against a name server
// with the default configuration (aclEnable=false, allowBrokerTakeover=false), a REGISTER_BROKER
// claiming a live broker's name and id 0 from another address and an UNREGISTER_BROKER of it
// sent on another connection are both refused with NO_PERMISSION, and the route still names the
// real broker. A new broker name is still accepted (RocketMQ's behaviour).
func TestNamesrvRefusesTakeoverWithoutACL(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	const codeUnregBrk = 104
	fake := map[string]string{"brokerName": c.b.name, "brokerAddr": "127.0.0.1:1", "clusterName": "DefaultCluster",
		"haServerAddr": "127.0.0.1:2", "brokerId": "0"}
	body := []byte(`{"topicConfigSerializeWrapper":{"topicConfigTable":{"TBW102":{"topicName":"TBW102","readQueueNums":8,"writeQueueNums":8,"perm":7,"topicFilterType":"SINGLE_TAG"}},"dataVersion":{"counter":999,"timestamp":1,"stateVersion":999}},"filterServerList":[]}`)
	resp, err := rawRequest(c.ns.addr, codeRegBrk, fake, body, 5*time.Second)
	if err != nil || resp.Code != codeNoPerm {
		t.Fatalf("REGISTER_BROKER taking over %s: %v %+v, want NO_PERMISSION", c.b.name, err, resp)
	}
	t.Logf("takeover: %d %q", resp.Code, resp.Remark)
	unreg := map[string]string{"brokerName": c.b.name, "brokerAddr": c.b.addr, "clusterName": "DefaultCluster", "brokerId": "0"}
	resp, err = rawRequest(c.ns.addr, codeUnregBrk, unreg, nil, 5*time.Second)
	if err != nil || resp.Code != codeNoPerm {
		t.Fatalf("UNREGISTER_BROKER of %s from a stranger: %v %+v, want NO_PERMISSION", c.b.name, err, resp)
	}
	t.Logf("unregister: %d %q", resp.Code, resp.Remark)
	if err := routeHasBroker(c.ns.addr, "TBW102", c.b.addr); err != nil {
		t.Fatalf("after the refused requests: %v", err)
	}
	if err := routeHasBroker(c.ns.addr, "TBW102", "127.0.0.1:1"); err == nil {
		t.Fatal("the fake address is in the route")
	}
	// A broker name of its own is accepted, as RocketMQ does without ACL.
	other := map[string]string{"brokerName": uniq("other"), "brokerAddr": "127.0.0.1:3", "clusterName": "DefaultCluster",
		"haServerAddr": "127.0.0.1:4", "brokerId": "0"}
	if resp, err := rawRequest(c.ns.addr, codeRegBrk, other, body, 5*time.Second); err != nil || resp.Code != respSuccess {
		t.Fatalf("REGISTER_BROKER of a new broker name: %v %+v", err, resp)
	}
}
