package broker

import (
	"strings"
	"testing"

	"rocketraft/config"
	"rocketraft/remoting"
)

func TestParseSendHeaderV1AndV2(t *testing.T) {
	v1 := remoting.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "PG", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "3", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "7",
		"properties": "TAGS\x01A\x02", "reconsumeTimes": "2", "unitMode": "false", "maxReconsumeTimes": "5", "batch": "false",
	}, nil)
	v2 := remoting.NewRequest(remoting.SendMessageV2, map[string]string{
		"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000000", "h": "7",
		"i": "TAGS\x01A\x02", "j": "2", "k": "false", "l": "5", "m": "false",
	}, nil)
	for _, req := range []*remoting.Command{v1, v2} {
		h, err := parseSendHeader(req)
		if err != nil {
			t.Fatalf("code %d: %v", req.Code, err)
		}
		if h.ProducerGroup != "PG" || h.Topic != "T" || h.QueueID != 3 || h.Flag != 7 || h.BornTimestamp != 1700000000000 ||
			h.ReconsumeTimes != 2 || h.MaxReconsumeTimes != 5 || h.DefaultTopicQueueNums != 4 || h.Properties != "TAGS\x01A\x02" {
			t.Fatalf("code %d: %+v", req.Code, h)
		}
	}
}

func TestParseSendHeaderErrorsNameTheField(t *testing.T) {
	req := remoting.NewRequest(remoting.SendMessageV2, map[string]string{"a": "PG", "b": "T", "d": "4", "e": "x", "f": "0", "g": "1", "h": "0"}, nil)
	if _, err := parseSendHeader(req); err == nil || !strings.Contains(err.Error(), "queueId") {
		t.Fatalf("want an error naming queueId, got %v", err)
	}
	req = remoting.NewRequest(remoting.SendMessageV2, map[string]string{"a": "PG", "b": "T", "d": "4", "e": "1", "f": "0", "h": "0"}, nil)
	if _, err := parseSendHeader(req); err == nil || !strings.Contains(err.Error(), "bornTimestamp") {
		t.Fatalf("want an error naming bornTimestamp, got %v", err)
	}
	req = remoting.NewRequest(remoting.SendMessageV2, map[string]string{"b": "T", "d": "4", "e": "1", "f": "0", "g": "1", "h": "0"}, nil)
	if _, err := parseSendHeader(req); err == nil || !strings.Contains(err.Error(), "producerGroup") {
		t.Fatalf("want an error naming producerGroup, got %v", err)
	}
}

func TestWithClusterProperty(t *testing.T) {
	b := &Broker{cfg: &config.Broker{BrokerClusterName: "C1"}}
	cases := map[string]string{
		"":                              "CLUSTER\x01C1\x02",
		"TAGS\x01A\x02":                 "TAGS\x01A\x02CLUSTER\x01C1\x02",
		"TAGS\x01A":                     "TAGS\x01A\x02CLUSTER\x01C1\x02",
		"CLUSTER\x01X\x02":              "CLUSTER\x01X\x02",
		"TAGS\x01A\x02CLUSTER\x01X\x02": "TAGS\x01A\x02CLUSTER\x01X\x02",
		"MYCLUSTER\x01X\x02":            "MYCLUSTER\x01X\x02CLUSTER\x01C1\x02",
	}
	for in, want := range cases {
		if got := b.withClusterProperty(in); got != want {
			t.Errorf("%q: got %q want %q", in, got, want)
		}
	}
}

func TestSplitKeys(t *testing.T) {
	got := splitKeys(" k1  k2 k3 ")
	if strings.Join(got, ",") != "k1,k2,k3" {
		t.Fatal(got)
	}
}

func TestTPSRates(t *testing.T) {
	s := newStats()
	if got := s.rates(false); got != "0.00 0.00 0.00" {
		t.Fatalf("no samples: %q", got)
	}
	for i := 0; i < 700; i++ {
		s.putTotal.Add(10)
		s.sample()
	}
	if got := s.rates(false); got != "10.00 10.00 10.00" {
		t.Fatalf("steady 10/s: %q", got)
	}
	if got := s.rates(true); got != "0.00 0.00 0.00" {
		t.Fatalf("gets: %q", got)
	}
}
