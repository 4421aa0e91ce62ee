package protocol

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestNamesrvHeadersRoundTrip(t *testing.T) {
	headers := []Header{
		&RegisterBrokerRequestHeader{BrokerName: "b", BrokerAddr: "1.2.3.4:10911", ClusterName: "C", HaServerAddr: "1.2.3.4:10912",
			BrokerID: 1, HeartbeatTimeoutMillis: ptr(int64(30000)), EnableActingMaster: ptr(false), Compressed: false, BodyCrc32: 12345},
		&RegisterBrokerRequestHeader{BrokerName: "b", BrokerAddr: "a", ClusterName: "C", HaServerAddr: ""},
		&RegisterBrokerResponseHeader{HaServerAddr: "h", MasterAddr: "m"},
		&RegisterBrokerResponseHeader{},
		&UnregisterBrokerRequestHeader{BrokerName: "b", BrokerAddr: "a", ClusterName: "C", BrokerID: 2},
		&QueryDataVersionResponseHeader{Changed: true},
		&GetRouteInfoRequestHeader{Topic: "T", AcceptStandardJSONOnly: true},
		&DeleteTopicFromNamesrvRequestHeader{Topic: "T", ClusterName: "C"},
		&RegisterTopicRequestHeader{Topic: "T"},
		&PutKVConfigRequestHeader{Namespace: "N", Key: "K", Value: ""},
		&GetKVConfigRequestHeader{Namespace: "N", Key: "K"},
		&GetKVListByNamespaceRequestHeader{Namespace: "N"},
		&GetKVConfigResponseHeader{Value: "v"},
		&BrokerNameHeader{BrokerName: "b"},
		&WritePermResponseHeader{Key: WipeTopicCountKey, Count: 3},
		&GetTopicsByClusterRequestHeader{Cluster: "C"},
		&BrokerHeartbeatRequestHeader{ClusterName: "C", BrokerAddr: "a", BrokerName: "b", BrokerID: ptr(int64(0)), Epoch: ptr(int32(2))},
	}
	for _, h := range headers {
		ext := h.ToExt()
		back := reflect.New(reflect.TypeOf(h).Elem()).Interface().(Header)
		if w, ok := back.(*WritePermResponseHeader); ok {
			w.Key = WipeTopicCountKey
		}
		if err := back.FromExt(ext); err != nil {
			t.Fatalf("%T from %v: %v", h, ext, err)
		}
		if !reflect.DeepEqual(back, h) {
			t.Errorf("%T round trip: got %+v want %+v (ext %v)", h, back, h, ext)
		}
	}
}

func TestRegisterBrokerHeaderWire(t *testing.T) {
	h := &RegisterBrokerRequestHeader{BrokerName: "b", BrokerAddr: "a:1", ClusterName: "C", HaServerAddr: "a:2", BrokerID: 0, BodyCrc32: -1}
	want := map[string]string{"brokerName": "b", "brokerAddr": "a:1", "clusterName": "C", "haServerAddr": "a:2", "brokerId": "0",
		"compressed": "false", "bodyCrc32": "-1"}
	if got := h.ToExt(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	var r RegisterBrokerResponseHeader
	if len(r.ToExt()) != 0 {
		t.Fatal("empty response header must have no fields")
	}
}

func TestHeaderMissingField(t *testing.T) {
	var h RegisterBrokerRequestHeader
	err := h.FromExt(map[string]string{"brokerName": "b", "brokerAddr": "a", "clusterName": "C", "haServerAddr": "h"})
	if !errors.Is(err, ErrMissingField) || !strings.Contains(err.Error(), "brokerId") {
		t.Fatalf("err %v", err)
	}
	var g GetRouteInfoRequestHeader
	if err := g.FromExt(nil); !errors.Is(err, ErrMissingField) || !strings.Contains(err.Error(), "topic") {
		t.Fatalf("err %v", err)
	}
	var p PutKVConfigRequestHeader
	if err := p.FromExt(map[string]string{"namespace": "n", "key": "k"}); !errors.Is(err, ErrMissingField) || !strings.Contains(err.Error(), "value") {
		t.Fatalf("err %v", err)
	}
}

func TestHeaderBadNumber(t *testing.T) {
	var h UnregisterBrokerRequestHeader
	err := h.FromExt(map[string]string{"brokerName": "b", "brokerAddr": "a", "clusterName": "C", "brokerId": "x1"})
	if !errors.Is(err, ErrBadField) || !strings.Contains(err.Error(), "brokerId") {
		t.Fatalf("err %v", err)
	}
}

func TestHeaderJavaBooleans(t *testing.T) {
	var g GetRouteInfoRequestHeader
	if err := g.FromExt(map[string]string{"topic": "T", "acceptStandardJsonOnly": "TRUE", "ignored": "x"}); err != nil || !g.AcceptStandardJSONOnly {
		t.Fatalf("%+v %v", g, err)
	}
	if err := g.FromExt(map[string]string{"topic": "T", "acceptStandardJsonOnly": "yes"}); err != nil || g.AcceptStandardJSONOnly {
		t.Fatalf("%+v %v", g, err)
	}
}
