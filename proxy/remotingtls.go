package proxy

import (
	"crypto/tls"
	"fmt"

	"rocketraft/remoting"
)

// remotingTLS is the remoting listener's TLS (tls.server.mode with tlsCertPath/tlsKeyPath; nil
// when disabled) and that of the proxy's own remoting connections (tls.enable; nil when off).
func (c *Config) remotingTLS() (*remoting.ServerTLS, *tls.Config, error) {
	server, err := remoting.NewServerTLS(c.TLSServerMode, c.TLSCertPath, c.TLSKeyPath)
	if err != nil {
		return nil, nil, fmt.Errorf("remoting listener TLS (tlsCertPath/tlsKeyPath): %w", err)
	}
	if !c.TLSEnable {
		return server, nil, nil
	}
	client, err := remoting.NewClientTLS(c.TLSClientAuthServer, c.TLSClientTrustCertPath)
	if err != nil {
		return nil, nil, fmt.Errorf("tls.enable: %w", err)
	}
	return server, client, nil
}
