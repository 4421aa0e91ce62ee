package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStatusPage: the metrics port serves the page and /status with the proxy's addresses,
// version and rates (zero without traffic).
func TestStatusPage(t *testing.T) {
	s, _ := startTestServer(t, nil)
	cl := &httpGetter{}
	if page := cl.get(t, "http://"+s.MetricsAddr()+"/"); !strings.Contains(page, "rocketraft proxy") {
		t.Fatalf("page: %.200s", page)
	}
	var st struct {
		GrpcAddr     string `json:"grpcAddr"`
		RemotingAddr string `json:"remotingAddr"`
		Version      struct {
			GoVersion string `json:"goVersion"`
		} `json:"version"`
		Rates   ProxyRates    `json:"rates"`
		Clients []ProxyClient `json:"clients"`
	}
	if err := json.Unmarshal([]byte(cl.get(t, "http://"+s.MetricsAddr()+"/status")), &st); err != nil {
		t.Fatal(err)
	}
	if st.GrpcAddr != s.Addr() || st.RemotingAddr != s.RemotingAddr() || st.Version.GoVersion == "" || st.Rates.IntervalMs == 0 || st.Clients == nil {
		t.Fatalf("status %+v", st)
	}
}
