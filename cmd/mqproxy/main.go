// Command mqproxy runs one stateless proxy in front of a rocketraft cluster for RocketMQ 5 gRPC
// clients (package proxy). Configuration: an optional JSON file (-pc, Apache's rmq-proxy.json
// keys) overridden by flags. It stops gracefully on SIGINT or SIGTERM.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"rocketraft/config"
	"rocketraft/proxy"
)

func main() { os.Exit(run()) }

// defaultGCPercent trades a little memory for CPU: the proxy's heap is small and short-lived (the
// messages in flight), and collecting it less often saves CPU on every call. GOGC overrides it.
const defaultGCPercent = 400

func run() int {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	cfg, err := load(os.Args[1:])
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mqproxy: %v\n", err)
		return 2
	}
	logger := config.NewLogger("mqproxy", "info", "text", os.Stderr)
	srv, err := proxy.New(cfg, logger)
	if err != nil {
		logger.Error("cannot start the proxy", "error", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "The Proxy boot success. grpc=%s namesrv=%s\n", srv.Addr(), cfg.NamesrvAddr)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	s := <-sig
	logger.Info("shutting down", "signal", s.String())
	if err := srv.Close(10 * time.Second); err != nil {
		logger.Warn("shutdown", "error", err)
	}
	return 0
}

// load reads -pc (JSON, unknown keys refused) and then the flags, which override it.
func load(args []string) (proxy.Config, error) {
	cfg := proxy.DefaultConfig()
	fs := pflag.NewFlagSet("mqproxy", pflag.ContinueOnError)
	file := fs.String("pc", "", "JSON configuration file with Apache RocketMQ proxy's keys (namesrvAddr, grpcServerPort, listenHost)")
	ns := fs.StringP("namesrvAddr", "n", "", "name servers, ';'-separated (overrides the file)")
	port := fs.Int("grpcServerPort", -1, "gRPC port for RocketMQ 5 clients (default 8081; 0 picks a free port)")
	host := fs.String("listenHost", "", "address the gRPC port binds (default 0.0.0.0)")
	cert := fs.String("tlsCertPath", "", "PEM certificate for TLS clients (default: a self-signed one)")
	key := fs.String("tlsKeyPath", "", "PEM key of tlsCertPath")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			return cfg, fmt.Errorf("-pc: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return cfg, fmt.Errorf("-pc %s: %w", *file, err)
		}
	}
	if *ns != "" {
		cfg.NamesrvAddr = *ns
	}
	if *port >= 0 {
		cfg.GrpcServerPort = *port
	}
	if *host != "" {
		cfg.ListenHost = *host
	}
	if *cert != "" {
		cfg.TLSCertPath = *cert
	}
	if *key != "" {
		cfg.TLSKeyPath = *key
	}
	return cfg, cfg.Validate()
}
