package proxy

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestConfMap: the first lookup waits for the fetch; later ones answer from the cache, a stale
// entry at once while one background fetch refreshes it; a failed refresh keeps the last value,
// a failed first lookup is remembered until the TTL.
func TestConfMap(t *testing.T) {
	var c confMap[*string]
	ctx := context.Background()
	var calls atomic.Int32
	val := func(s string) *string { return &s }
	next := atomic.Pointer[string]{}
	fail := atomic.Bool{}
	fetch := func(context.Context) (*string, error) {
		calls.Add(1)
		if fail.Load() {
			return nil, errors.New("down")
		}
		return next.Load(), nil
	}
	const ttl = 50 * time.Millisecond
	next.Store(val("v1"))
	if v, err := c.get(ctx, "k", ttl, time.Second, fetch); err != nil || *v != "v1" {
		t.Fatalf("first: %v %v", v, err)
	}
	next.Store(val("v2"))
	if v, _ := c.get(ctx, "k", ttl, time.Second, fetch); *v != "v1" || calls.Load() != 1 {
		t.Fatalf("fresh: %v after %d fetches", *v, calls.Load())
	}
	time.Sleep(ttl)
	if v, _ := c.get(ctx, "k", ttl, time.Second, fetch); *v != "v1" {
		t.Fatalf("stale entry answered %v, want v1 at once", *v)
	}
	waitFor := func(what string, f func() bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Second); !f(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
		}
	}
	waitFor("background refresh", func() bool { v, _ := c.get(ctx, "k", ttl, time.Second, fetch); return *v == "v2" })
	fail.Store(true)
	time.Sleep(ttl)
	_, _ = c.get(ctx, "k", ttl, time.Second, fetch) // marks the entry refreshing, starts a refresh that fails
	waitFor("failed refresh", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.m["k"].refreshing
	})
	if v, err := c.get(ctx, "k", ttl, time.Second, fetch); err != nil || *v != "v2" {
		t.Fatalf("after a failed refresh: %v %v, want v2 kept", v, err)
	}
	if _, err := c.get(ctx, "other", ttl, time.Second, fetch); err == nil {
		t.Fatal("a failed first lookup answered no error")
	}
	n := calls.Load()
	if _, err := c.get(ctx, "other", ttl, time.Second, fetch); err == nil || calls.Load() != n {
		t.Fatalf("a failed first lookup is not remembered: %v, %d fetches", err, calls.Load()-n)
	}
}
