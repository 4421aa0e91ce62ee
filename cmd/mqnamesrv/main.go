// Command mqnamesrv runs one RocketMQ-compatible name server. Configuration comes from an
// optional properties file (-c, RocketMQ key names) overridden by --<key>=<value> flags; see
// mqnamesrv --help. It stops cleanly on SIGINT or SIGTERM.
package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"rocketraft/acl"
	"rocketraft/config"
	"rocketraft/internal/version"
	"rocketraft/namesrv"
	"rocketraft/remoting"
)

func main() {
	os.Exit(run())
}

func run() int {
	cfg, warnings, err := config.LoadNamesrv(os.Args[1:])
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprint(os.Stderr, config.NamesrvUsage())
		return 0
	}
	if errors.Is(err, config.ErrVersion) {
		fmt.Println(version.Line("mqnamesrv"))
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mqnamesrv: %v\n", err)
		return 2
	}
	logger := config.NewLogger("mqnamesrv", cfg.LogLevel, cfg.LogFormat, os.Stderr)
	for _, w := range warnings {
		logger.Warn("configuration", "warning", w)
	}
	var store *acl.Store
	if cfg.AclEnable {
		if store, err = acl.OpenStore(cfg.AclConfigFile, logger.Named("acl")); err != nil {
			logger.Error("cannot load the ACL file (aclEnable=true)", "error", err)
			return 1
		}
		logger.Info("ACL on: registrations and route/KV writes need an admin signature", "file", cfg.AclConfigFile, "accounts", len(store.Current().Accounts))
	}
	if !cfg.AclEnable && !config.LoopbackOnly(cfg.ListenAddr) {
		takeover := "refused (allowBrokerTakeover=false)"
		if cfg.AllowBrokerTakeover {
			takeover = "ALLOWED to anyone (allowBrokerTakeover=true)"
		}
		logger.Warn("SECURITY: aclEnable=false and the name server listens beyond loopback: anyone who reaches "+cfg.ListenAddr+
			" may register brokers of their own (new broker names get a share of the routes of the topics they claim), change KV config and wipe write permissions; set aclEnable=true (docs/operations.md \"ACL\") or keep the port on a private network",
			"listen", cfg.ListenAddr, "takeover_of_live_brokers", takeover)
	}
	serverTLS, err := remoting.NewServerTLS(cfg.TLSServerMode, cfg.TLSServerCertPath, cfg.TLSServerKeyPath)
	if err != nil {
		logger.Error("cannot set up TLS on the remoting port", "error", err)
		return 1
	}
	var clientTLS *tls.Config
	if cfg.TLSEnable {
		clientTLS, _ = remoting.NewClientTLS(false, "") // without a trust file it cannot fail
	}
	srv, err := namesrv.New(namesrv.Config{
		ClientTLS:           clientTLS,
		ACL:                 store,
		AllowBrokerTakeover: cfg.AllowBrokerTakeover,
		TLS:                 serverTLS,
		MaxConnections:      cfg.MaxConnections,
		ListenAddr:          cfg.ListenAddr,
		BrokerExpiry:        cfg.BrokerExpiryDuration(),
		ScanInterval:        cfg.ScanInterval(),
		KvConfigPath:        cfg.KvConfigPath,
		OrderMessageEnable:  cfg.OrderMessageEnable,
		HTTPAddr:            cfg.HTTPAddr(),
		HTTPAuthToken:       cfg.HTTPAuthToken,
		Logger:              logger,
	})
	if err != nil {
		logger.Error("cannot create name server", "error", err)
		return 1
	}
	if err := srv.Start(); err != nil {
		logger.Error("cannot start name server", "error", err)
		return 1
	}
	fmt.Printf("The Name Server boot success. listen=%s serializeType=JSON tls.server.mode=%s\n", srv.Addr(), cfg.TLSServerMode)
	fmt.Printf("version: %s\n", version.Get())
	if a := srv.HTTPAddr(); a != "" {
		fmt.Printf("HTTP endpoints (/metrics): http://%s\n", a)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	s := <-sig
	logger.Info("shutting down", "signal", s.String())
	if err := srv.Close(); err != nil {
		logger.Error("shutdown", "error", err)
		return 1
	}
	return 0
}
