package config

import "testing"

func TestLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:9876": true, "127.0.0.2:1": true, "[::1]:9876": true, "localhost:9876": true, "127.0.0.1": true,
		":9876": false, "0.0.0.0:9876": false, "[::]:9876": false, "10.0.0.5:9876": false, "broker.example.com:10911": false, "": false,
	} {
		if got := LoopbackOnly(addr); got != want {
			t.Errorf("LoopbackOnly(%q) = %v, want %v", addr, got, want)
		}
	}
}

// FuzzLoopbackOnly: any input is classified without panicking.
func FuzzLoopbackOnly(f *testing.F) {
	for _, s := range []string{"127.0.0.1:9876", "[::1]:1", "localhost:1", ":1", "0.0.0.0:1", "[", "a:b:c", "127.0.0.1%lo:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		_ = LoopbackOnly(addr)
	})
}
