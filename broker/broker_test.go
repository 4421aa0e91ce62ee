package broker

import (
	"strings"
	"testing"

	"rocketraft/config"
	"rocketraft/message"
)

func TestWithClusterProperty(t *testing.T) {
	s := &sender{cfg: &config.Broker{BrokerClusterName: "C1"}}
	cases := map[string]string{
		"":                              "CLUSTER\x01C1\x02",
		"TAGS\x01A\x02":                 "TAGS\x01A\x02CLUSTER\x01C1\x02",
		"TAGS\x01A":                     "TAGS\x01A\x02CLUSTER\x01C1\x02",
		"CLUSTER\x01X\x02":              "CLUSTER\x01X\x02",
		"TAGS\x01A\x02CLUSTER\x01X\x02": "TAGS\x01A\x02CLUSTER\x01X\x02",
		"MYCLUSTER\x01X\x02":            "MYCLUSTER\x01X\x02CLUSTER\x01C1\x02",
	}
	for in, want := range cases {
		if got := s.withCluster(in, message.ReadKnown(in).Has&message.KnownCluster != 0); got != want {
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
