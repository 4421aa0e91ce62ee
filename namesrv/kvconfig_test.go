package namesrv

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestKVStorePersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "namesrv", "kvConfig.json")
	s, err := OpenKVStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put("ORDER_TOPIC_CONFIG", "T", "broker-a:4"); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("NS", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("NS", "k"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"broker-a:4"}}}` {
		t.Fatalf("file %s", data)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatal("temporary file left behind")
	}
	s2, err := OpenKVStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s2.Get("ORDER_TOPIC_CONFIG", "T"); !ok || v != "broker-a:4" {
		t.Fatalf("reloaded %q %v", v, ok)
	}
	if _, ok := s2.List("NS"); ok {
		t.Fatal("empty namespace kept")
	}
	l, _ := s2.List("ORDER_TOPIC_CONFIG")
	l["x"] = "y"
	if l2, _ := s2.List("ORDER_TOPIC_CONFIG"); !reflect.DeepEqual(l2, map[string]string{"T": "broker-a:4"}) {
		t.Fatal("List shares state")
	}
}

func TestKVStoreMissingAndCorrupt(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenKVStore(filepath.Join(dir, "none.json"))
	if err != nil || s == nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{oops"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenKVStore(bad); err == nil {
		t.Fatal("corrupt file accepted")
	}
	mem, _ := OpenKVStore("")
	if err := mem.Put("a", "b", "c"); err != nil {
		t.Fatal(err)
	}
}
