// Command mqbroker runs one RocketMQ-compatible broker: mqbroker -c broker.properties.
// Flags --<key>=<value> override the file's keys; see mqbroker --help.
// --enable-proxy also runs the RocketMQ 5 gRPC proxy in this process (docs/proxy.md).
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"rocketraft/broker"
	"rocketraft/config"
	"rocketraft/internal/sysmon"
	"rocketraft/internal/uring"
	"rocketraft/internal/version"
	"rocketraft/proxy"
)

func main() {
	os.Exit(run())
}

// defaultGCPercent trades a little memory for CPU: the broker's message data
// lives in mmap'ed files, so its Go heap is small and short-lived, and
// collecting it less often saves CPU on the send path. GOGC overrides it.
const defaultGCPercent = 400

func run() int {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	cfg, warnings, err := config.LoadBroker(os.Args[1:])
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprint(os.Stderr, config.BrokerUsage())
		return 0
	}
	if errors.Is(err, config.ErrVersion) {
		fmt.Println(version.Line("mqbroker"))
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mqbroker: %v\n", err)
		return 2
	}
	if cfg.SysmonBackoff {
		// Before anything is logged, opened or served: on success this process starts again.
		if err := sysmon.Reexec(); err != nil {
			warnings = append(warnings, err.Error()+" (sysmonBackoff: going on without it)")
		}
	}
	logger := config.NewLogger("mqbroker", cfg.LogLevel, cfg.LogFormat, os.Stderr)
	for _, w := range warnings {
		logger.Warn("configuration", "warning", w)
	}
	if cfg.SysmonBackoff {
		logger.Debug("runtime settings (sysmonBackoff)", "GODEBUG", os.Getenv("GODEBUG"))
	}
	_, envProcs := os.LookupEnv("GOMAXPROCS")
	procs, leaderProcs, procsWhy := cfg.Procs(runtime.GOMAXPROCS(0), envProcs)
	if procs > 0 {
		runtime.GOMAXPROCS(procs)
		logger.Info("scheduler CPUs", "procs", procs, "leaderProcs", leaderProcs, "reason", procsWhy)
	}
	if !cfg.IoUringEnable {
		uring.Disable()
	}
	b, err := broker.New(cfg, logger)
	if err != nil {
		if broker.IsDiskFailure(err) {
			// A supervisor tells it from a configuration error by the code (docs/faults.md).
			logger.Error("DISK FAILURE at start: a write to the data directory failed; exiting with code 74 (EX_IOERR); start it again once the disk works (a writeback error the previous run left unseen is reported once, to the next fsync)", "error", err)
			return broker.DiskFailureExitCode
		}
		logger.Error("cannot start broker", "error", err)
		return 1
	}
	if leaderProcs > 0 {
		// The leader's share while it leads, the follower's otherwise (config.Broker.Procs).
		b.OnLeadership(func(leading bool) {
			n := procs
			if leading {
				n = leaderProcs
			}
			if runtime.GOMAXPROCS(n) != n {
				logger.Info("scheduler CPUs", "procs", n, "leading", leading, "reason", procsWhy)
			}
		})
	}
	if err := b.Start(); err != nil {
		logger.Error("cannot start broker", "error", err)
		_ = b.Close()
		return 1
	}
	fmt.Printf("The broker[%s, %s] boot success. namesrv=%s store=%s\n", cfg.BrokerName, b.Addr(), cfg.NamesrvAddr, cfg.StorePathRootDir)
	fmt.Printf("version: %s\n", version.Get())
	fmt.Printf("cluster=%s role=%s brokerId=%d commitlog=%s httpPort=%d logFormat=%s procs=%d\n",
		cfg.BrokerClusterName, b.Role(), b.BrokerID(), cfg.StorePathCommitLog, cfg.HTTPPort, cfg.LogFormat, runtime.GOMAXPROCS(0))
	if cfg.EnableDLegerCommitLog {
		// The role (and so the registered brokerId) follows Raft; see the "role changed" log lines.
		fmt.Printf("DLedger mode: group=%s self=%s peers=%s\n", cfg.DLegerGroup, cfg.DLegerSelfID, cfg.DLegerPeers)
	}
	var px *proxy.Server
	if cfg.EnableProxy {
		// Local mode: the RocketMQ 5 gRPC proxy in this process (docs/proxy.md).
		pcfg, err := proxy.LocalConfig(cfg)
		if err == nil {
			px, err = proxy.New(pcfg, logger.Named("proxy"))
		}
		if err != nil {
			logger.Error("cannot start the local proxy", "error", err)
			_ = b.Close()
			return 1
		}
		fmt.Printf("The Proxy boot success. grpc=%s metrics=%s (local mode)\n", px.Addr(), px.MetricsAddr())
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	s := <-sig
	logger.Info("shutting down", "signal", s.String())
	// Every wait of Close is bounded (broker/shutdown.go); this is the backstop: past the bound
	// the process exits anyway, which releases the store lock, with the goroutines' stacks in
	// the log to show what Close was waiting for.
	done := make(chan error, 1)
	go func() {
		if px != nil {
			if err := px.Shutdown(); err != nil {
				logger.Warn("local proxy shutdown", "error", err)
			}
		}
		done <- b.Close()
	}()
	bound := b.ShutdownBound()
	select {
	case err := <-done:
		if err != nil {
			logger.Error("shutdown", "error", err)
			return 1
		}
		return 0
	case <-time.After(bound):
		logger.Error("shutdown did not finish within its bound; exiting without it (goroutine stacks follow)", "bound", bound)
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		return 1
	}
}
