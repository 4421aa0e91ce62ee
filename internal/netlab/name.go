package netlab

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
)

// netnsDir is where `ip netns add` mounts named namespaces.
const netnsDir = "/run/netns"

// family starts every namespace name a lab creates; Sweep only ever looks at names that
// match nsPattern, so it cannot touch namespaces that belong to anything else.
const family = "rrlab"

// nsPattern parses "rrlab<pid>x<index>-<role>": role is "sw" or "h<i>".
var nsPattern = regexp.MustCompile(`^` + family + `([0-9]+)x([0-9]+)-(sw|h[0-9]+)$`)

// Lab indexes double as the third octet of the lab's 10.213.K.0/24 subnet.
const (
	minIndex = 1
	maxIndex = 254
)

// labName is the prefix of every namespace of lab index idx created by process pid.
func labName(pid, idx int) string {
	return fmt.Sprintf("%s%dx%d", family, pid, idx)
}

// nsInfo is what a lab namespace name says about its creator.
type nsInfo struct {
	name  string
	pid   int
	index int
}

// labNamespaces lists the named namespaces that belong to some lab, from any process.
func labNamespaces() ([]nsInfo, error) {
	entries, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netlab: list namespaces: %w", err)
	}
	var out []nsInfo
	for _, e := range entries {
		m := nsPattern.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, err1 := strconv.Atoi(m[1])
		idx, err2 := strconv.Atoi(m[2])
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, nsInfo{name: e.Name(), pid: pid, index: idx})
	}
	return out, nil
}

// freeIndex returns the lowest lab index no listed namespace uses.
func freeIndex(existing []nsInfo) (int, error) {
	used := map[int]bool{}
	for _, ns := range existing {
		used[ns.index] = true
	}
	for idx := minIndex; idx <= maxIndex; idx++ {
		if !used[idx] {
			return idx, nil
		}
	}
	return 0, fmt.Errorf("netlab: all %d lab subnets 10.213.%d-%d.0/24 are in use", maxIndex-minIndex+1, minIndex, maxIndex)
}

// nsExists reports whether a named namespace is still mounted.
func nsExists(name string) bool {
	_, err := os.Stat(netnsDir + "/" + name)
	return err == nil
}
