// Package smaps reads what Linux says about this process's memory mappings
// (/proc/self/smaps), for tests that check the advice the store gives the kernel about its
// mapped files (storage/vfs.Mapping.Advise).
package smaps

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Flags returns the VmFlags of the mapping of this process that holds addr ("rr" is
// MADV_RANDOM, "sr" MADV_SEQUENTIAL; see proc(5)).
func Flags(addr uintptr) ([]string, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, fmt.Errorf("smaps: %w", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok { // a mapping's first line
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = uint64(addr) >= a && uint64(addr) < b
				continue
			}
		}
		if in && fields[0] == "VmFlags:" {
			return fields[1:], nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("smaps: %w", err)
	}
	return nil, fmt.Errorf("smaps: no mapping holds %#x", addr)
}

// RandomRead reports whether the mapping holding addr is advised MADV_RANDOM.
func RandomRead(addr uintptr) (bool, error) {
	flags, err := Flags(addr)
	return slices.Contains(flags, "rr"), err
}
