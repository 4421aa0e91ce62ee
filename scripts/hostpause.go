//go:build ignore

// hostpause measures how often this machine's CPUs stop running a busy thread, and when: a
// latency tail that no profile of our processes explains can be the host pausing the virtual
// CPUs. It spins one thread per CPU (or -threads), reading the clock, and reports every gap of
// at least -min between two reads, with how many fell in each 10 ms of every 100 ms of
// wall-clock time (a periodic pause shows as one full bin).
//
// Usage: go run scripts/hostpause.go [-threads N] [-d 5s] [-min 500us]
package main

import (
	"flag"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"
)

type pause struct {
	at  time.Time
	dur time.Duration
}

func main() {
	threads := flag.Int("threads", runtime.NumCPU(), "spinning threads")
	dur := flag.Duration("d", 5*time.Second, "how long to spin")
	minGap := flag.Duration("min", 500*time.Microsecond, "smallest gap reported")
	flag.Parse()
	runtime.GOMAXPROCS(*threads)
	var mu sync.Mutex
	var all []pause
	var wg sync.WaitGroup
	for range *threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			var mine []pause
			prev := time.Now()
			for end := prev.Add(*dur); prev.Before(end); {
				now := time.Now()
				if d := now.Sub(prev); d >= *minGap {
					mine = append(mine, pause{prev, d})
				}
				prev = now
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	var total time.Duration
	var bins [10]int
	for _, p := range all {
		total += p.dur
		bins[p.at.UnixNano()%int64(100*time.Millisecond)/int64(10*time.Millisecond)]++
	}
	fmt.Printf("%d threads, %v: %d pauses >= %v, %v per thread in all\n", *threads, *dur, len(all), *minGap, total/time.Duration(*threads))
	fmt.Printf("pauses by when they began, per 10 ms of every 100 ms of wall-clock time: %v\n", bins)
	sort.Slice(all, func(i, j int) bool { return all[i].dur > all[j].dur })
	for i := 0; i < len(all) && i < 5; i++ {
		fmt.Printf("  %v, %.1f ms into its 100 ms\n", all[i].dur.Round(time.Microsecond), float64(all[i].at.UnixNano()%int64(100*time.Millisecond))/1e6)
	}
}
