package broker

import (
	"crypto/tls"
	"fmt"

	"rocketraft/config"
	"rocketraft/remoting"
)

// remotingTLS builds the remoting port's TLS (tls.server.*; nil when disabled) and the TLS of
// the broker's own remoting connections (tls.enable; nil when off) from the configuration. A
// certificate that does not load is an error: the broker refuses to start rather than serve
// plaintext where TLS was asked for.
func remotingTLS(cfg *config.Broker) (*remoting.ServerTLS, *tls.Config, error) {
	server, err := remoting.NewServerTLS(cfg.TLSServerMode, cfg.TLSServerCertPath, cfg.TLSServerKeyPath)
	if err != nil {
		return nil, nil, fmt.Errorf("remoting port TLS: %w", err)
	}
	if !cfg.TLSEnable {
		return server, nil, nil
	}
	client, err := remoting.NewClientTLS(cfg.TLSClientAuthServer, cfg.TLSClientTrustCertPath)
	if err != nil {
		return nil, nil, fmt.Errorf("tls.enable: %w", err)
	}
	return server, client, nil
}
