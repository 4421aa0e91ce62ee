package broker

import (
	"encoding/json"
	"testing"

	"rocketraft/internal/version"
	"rocketraft/remoting"
)

// TestVersionReported: /status carries the build under "version" and GET_BROKER_RUNTIME_INFO
// under "rocketraftVersion", next to RocketMQ's brokerVersionDesc.
func TestVersionReported(t *testing.T) {
	b := httpTestBroker(t, nil)
	w := httpDo(b.status.handler(), "GET", "/status", "127.0.0.1:40000", "")
	var st struct {
		Version version.Info `json:"version"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || st.Version != version.Get() {
		t.Fatalf("/status version = %+v (err %v), want %+v", st.Version, err, version.Get())
	}
	resp := b.runtimeH.handleRuntimeInfo(nil, remoting.NewRequest(remoting.GetBrokerRuntimeInfo, nil, nil))
	var body struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		t.Fatalf("runtime info body %q: %v", resp.Body, err)
	}
	if body.Table["rocketraftVersion"] != version.Get().String() || body.Table["brokerVersionDesc"] == "" {
		t.Fatalf("runtime info table: rocketraftVersion %q brokerVersionDesc %q", body.Table["rocketraftVersion"], body.Table["brokerVersionDesc"])
	}
}
