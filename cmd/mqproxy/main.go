// Command mqproxy runs one stateless proxy in front of a rocketraft cluster for RocketMQ 5 gRPC
// clients (package proxy). Configuration: an optional JSON file (-pc rmq-proxy.json, Apache's
// keys) overridden by --<key>=<value> flags, -n for namesrvAddr; a bad key or value stops it
// with an error naming the key (docs/proxy.md lists the keys). SIGINT or SIGTERM stops it
// gracefully: no new connections, calls in flight finish (at most grpcShutdownTimeSeconds),
// long polls and Telemetry streams end with OK, exit status 0.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"rocketraft/config"
	"rocketraft/internal/version"
	"rocketraft/proxy"
)

func main() { os.Exit(run()) }

// configFile is Apache's -pc flag.
var configFile = config.JSONFile{Name: "pc", Usage: "(also -pc) JSON configuration file with Apache RocketMQ proxy's keys (rmq-proxy.json); flags override it"}

var shorthands = map[string]string{"namesrvAddr": "n"}

// defaultGCPercent trades a little memory for CPU: the proxy's heap is small and short-lived (the
// messages in flight), and collecting it less often saves CPU on every call. GOGC overrides it.
const defaultGCPercent = 400

func run() int {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	cfg, err := load(os.Args[1:])
	if errors.Is(err, config.ErrHelp) {
		def := proxy.DefaultConfig()
		fmt.Fprint(os.Stderr, config.JSONUsage("mqproxy", &def, configFile, shorthands))
		return 0
	}
	if errors.Is(err, config.ErrVersion) {
		fmt.Println(version.Line("mqproxy"))
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mqproxy: %v\n", err)
		return 2
	}
	logger := config.NewLogger("mqproxy", cfg.LogLevel, cfg.LogFormat, os.Stderr)
	srv, err := proxy.New(cfg, logger)
	if err != nil {
		logger.Error("cannot start the proxy", "error", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "The Proxy boot success. grpc=%s remoting=%s namesrv=%s metrics=%s\n", srv.Addr(), srv.RemotingAddr(), cfg.NamesrvAddr, srv.MetricsAddr())
	fmt.Fprintf(os.Stderr, "version: %s\n", version.Get())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	s := <-sig
	logger.Info("shutting down", "signal", s.String())
	if err := srv.Shutdown(); err != nil {
		logger.Warn("shutdown", "error", err)
	}
	logger.Info("stopped")
	return 0
}

// load applies the defaults, -pc and the flags, and validates the result.
func load(args []string) (proxy.Config, error) {
	cfg := proxy.DefaultConfig()
	if err := config.LoadJSON("mqproxy", &cfg, configFile, shorthands, args); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}
