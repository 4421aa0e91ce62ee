package broker

import (
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"

	"rocketraft/acl"
	"rocketraft/config"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

func TestACLResources(t *testing.T) {
	hb := protocol.MustEncode(protocol.HeartbeatData{ConsumerDataSet: []protocol.ConsumerData{{
		GroupName:           "G1",
		SubscriptionDataSet: []protocol.SubscriptionData{{Topic: "T1"}, {Topic: "%RETRY%G1"}},
	}}})
	lock := protocol.MustEncode(protocol.LockBatchRequestBody{ConsumerGroup: "G2"})
	cases := []struct {
		code int32
		ext  map[string]string
		body []byte
		want []acl.Resource
	}{
		{remoting.SendMessage, map[string]string{"topic": "T"}, nil, []acl.Resource{{Name: "T", Need: acl.Pub}}},
		{remoting.SendMessageV2, map[string]string{"b": "T", "a": "PG"}, nil, []acl.Resource{{Name: "T", Need: acl.Pub}}},
		{remoting.SendMessageV2, map[string]string{"b": "%RETRY%G"}, nil, []acl.Resource{{Name: "G", Group: true, Need: acl.Sub}}},
		{remoting.PullMessage, map[string]string{"topic": "T", "consumerGroup": "G"}, nil, []acl.Resource{{Name: "T", Need: acl.Sub}, {Name: "G", Group: true, Need: acl.Sub}}},
		{remoting.UpdateConsumerOffset, map[string]string{"topic": "T", "consumerGroup": "G"}, nil, []acl.Resource{{Name: "T", Need: acl.Sub}, {Name: "G", Group: true, Need: acl.Sub}}},
		{remoting.ConsumerSendMsgBack, map[string]string{"group": "G"}, nil, []acl.Resource{{Name: "G", Group: true, Need: acl.Sub}}},
		{remoting.HeartBeat, nil, hb, []acl.Resource{{Name: "G1", Group: true, Need: acl.Sub}, {Name: "T1", Need: acl.Sub}}},
		{remoting.HeartBeat, nil, []byte("not json"), nil},
		{remoting.LockBatchMQ, nil, lock, []acl.Resource{{Name: "G2", Group: true, Need: acl.Sub}}},
		{remoting.GetBrokerRuntimeInfo, nil, nil, nil},
	}
	for _, c := range cases {
		req := remoting.NewRequest(c.code, c.ext, c.body)
		if got := aclResources(req); !slices.Equal(got, c.want) {
			t.Errorf("code %d %v: got %+v, want %+v", c.code, c.ext, got, c.want)
		}
	}
	for _, code := range []int32{remoting.UpdateAndCreateTopic, remoting.DeleteTopicInBroker, remoting.UpdateBrokerConfig, remoting.UpdateAndCreateSubscriptionGroup, remoting.DeleteSubscriptionGroup, remoting.InvokeBrokerToResetOffset, remoting.TransferRaftLeader, remoting.AddRaftPeer, remoting.RemoveRaftPeer} {
		if !adminCodes[code] {
			t.Errorf("code %d is not an admin code", code)
		}
	}
}

func TestUpdateBrokerConfigAllowList(t *testing.T) {
	b := &Broker{cfg: &config.Broker{BrokerPermission: 6}, logger: hclog.NewNullLogger(), reg: newRegistrar()}
	call := func(body string) *remoting.Command {
		return b.handleUpdateBrokerConfig(nil, remoting.NewRequest(remoting.UpdateBrokerConfig, nil, []byte(body)))
	}
	if r := call("aclEnable=false\n"); r.Code != remoting.NoPermission {
		t.Fatalf("aclEnable: %d %q", r.Code, r.Remark)
	}
	// All or nothing: one refused key stops the allowed one too.
	if r := call("brokerPermission=4\nstorePathRootDir=/x\n"); r.Code != remoting.NoPermission || b.brokerPermission() != 6 {
		t.Fatalf("mixed: %d %q, perm %d", r.Code, r.Remark, b.brokerPermission())
	}
	if r := call("brokerPermission=99\n"); r.Code != remoting.InvalidParameter {
		t.Fatalf("bad value: %d %q", r.Code, r.Remark)
	}
	if r := call(""); r.Code != remoting.InvalidParameter {
		t.Fatalf("empty: %d %q", r.Code, r.Remark)
	}
	if r := call("brokerPermission=4\nslaveReadEnable=true\nlogLevel=warn\n"); r.Code != remoting.Success {
		t.Fatalf("allowed: %d %q", r.Code, r.Remark)
	}
	if b.brokerPermission() != 4 || !b.slaveReadEnabled() {
		t.Fatalf("not applied: perm %d slaveRead %v", b.brokerPermission(), b.slaveReadEnabled())
	}
	for _, k := range RuntimeConfigKeys {
		if _, ok := runtimeKeys[k]; !ok {
			t.Errorf("RuntimeConfigKeys lists %s without a parser", k)
		}
	}
	if len(RuntimeConfigKeys) != len(runtimeKeys) {
		t.Errorf("RuntimeConfigKeys and runtimeKeys differ")
	}
}
