//go:build ignore

// syncprobe measures what a durable append costs on this machine's disk, to choose the shape of
// the one-write path (docs/write-path.md): a batch written into one preallocated file and made
// durable with fdatasync, against the same batch plus a small record in a second file with both
// files synced (a side log of entry headers beside the commitlog). It alternates the two at each
// batch size, -rounds times, and prints every run: syncs per second, MB/s and the mean and p99
// time of one append.
//
// Usage: go run scripts/syncprobe.go [-dir /tmp] [-d 4s] [-rounds 2] [-batches 4096,65536,524288]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	dataSize = 1 << 30  // the data file, like a commitlog segment
	sideSize = 64 << 20 // the side file
	sideRec  = 48       // bytes per side record: index, term, position, length, checksum
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory for the probe's files (on the disk to measure)")
	dur := flag.Duration("d", 4*time.Second, "duration of each run")
	rounds := flag.Int("rounds", 2, "alternations of the two shapes at each batch size")
	batches := flag.String("batches", "4096,65536,524288", "batch sizes in bytes")
	flag.Parse()
	var sizes []int
	for _, s := range strings.Split(*batches, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 || n > dataSize/4 {
			fmt.Fprintf(os.Stderr, "syncprobe: bad batch size %q\n", s)
			os.Exit(2)
		}
		sizes = append(sizes, n)
	}
	for r := 1; r <= *rounds; r++ {
		for _, n := range sizes {
			for _, side := range []bool{false, true} {
				if err := probe(*dir, n, side, *dur, r); err != nil {
					fmt.Fprintf(os.Stderr, "syncprobe: %v\n", err)
					os.Exit(1)
				}
			}
		}
	}
}

// preallocated creates path with size bytes allocated and written once, so that later writes
// change no file metadata and fdatasync has only data to flush (as for a mapped commitlog file).
func preallocated(path string, size int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		f.Close()
		return nil, fmt.Errorf("fallocate %s: %w", path, err)
	}
	zero := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(zero)) {
		if _, err := f.WriteAt(zero, off); err != nil {
			f.Close()
			return nil, fmt.Errorf("fill %s: %w", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("sync %s: %w", path, err)
	}
	return f, nil
}

// probe appends batches of n bytes for dur, each made durable before the next, and prints the run.
func probe(dir string, n int, side bool, dur time.Duration, round int) error {
	dataPath, sidePath := filepath.Join(dir, "syncprobe.data"), filepath.Join(dir, "syncprobe.side")
	defer os.Remove(dataPath)
	defer os.Remove(sidePath)
	data, err := preallocated(dataPath, dataSize)
	if err != nil {
		return err
	}
	defer data.Close()
	var sf *os.File
	if side {
		if sf, err = preallocated(sidePath, sideSize); err != nil {
			return err
		}
		defer sf.Close()
	}
	batch, rec := make([]byte, n), make([]byte, sideRec)
	var off, soff int64
	var took []time.Duration
	start := time.Now()
	for time.Since(start) < dur {
		t := time.Now()
		if _, err := data.WriteAt(batch, off); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if off += int64(n); off+int64(n) > dataSize {
			off = 0
		}
		if sf != nil {
			if _, err := sf.WriteAt(rec, soff); err != nil {
				return fmt.Errorf("write side: %w", err)
			}
			soff = (soff + sideRec) % sideSize
			if err := unix.Fdatasync(int(sf.Fd())); err != nil {
				return fmt.Errorf("fdatasync side: %w", err)
			}
		}
		if err := unix.Fdatasync(int(data.Fd())); err != nil {
			return fmt.Errorf("fdatasync: %w", err)
		}
		took = append(took, time.Since(t))
	}
	el := time.Since(start).Seconds()
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	var sum time.Duration
	for _, d := range took {
		sum += d
	}
	shape := "one file"
	if side {
		shape = "data file + side file"
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("round %d  %-22s batch %7d B: %6.0f appends/s %7.1f MB/s  mean %7.0f us  p99 %7.0f us  load %s\n",
		round, shape, n, float64(len(took))/el, float64(len(took))*float64(n)/el/1e6,
		float64(sum.Microseconds())/float64(len(took)), float64(took[len(took)*99/100].Microseconds()),
		strings.Fields(string(load))[0])
	return nil
}
