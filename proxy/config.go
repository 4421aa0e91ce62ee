package proxy

import (
	"fmt"
	"strings"
	"time"
)

// Config is one proxy's configuration. Keys are Apache RocketMQ proxy's (rmq-proxy.json).
type Config struct {
	// NamesrvAddr lists the name servers, ';'-separated.
	NamesrvAddr string `json:"namesrvAddr"`
	// GrpcServerPort is where RocketMQ 5 clients connect (default 8081).
	GrpcServerPort int `json:"grpcServerPort"`
	// ListenHost is the address the gRPC port binds (default 0.0.0.0).
	ListenHost string `json:"listenHost"`
	// TLSCertPath and TLSKeyPath are the PEM certificate and key the gRPC port presents to
	// clients that speak TLS; empty: a self-signed one made at start. Plaintext clients are
	// served on the same port.
	TLSCertPath string `json:"tlsCertPath"`
	TLSKeyPath  string `json:"tlsKeyPath"`
	// RouteTTL is how long a topic's route is used before it is asked again (default 3 s); a
	// failed send refreshes it at once.
	RouteTTL time.Duration `json:"-"`
	// SendTimeout bounds one send to a broker (default 3 s).
	SendTimeout time.Duration `json:"-"`
}

// DefaultConfig is a proxy on 8081 with no name server set.
func DefaultConfig() Config {
	return Config{GrpcServerPort: 8081, ListenHost: "0.0.0.0", RouteTTL: 3 * time.Second, SendTimeout: 3 * time.Second}
}

// Validate names the first bad key.
func (c *Config) Validate() error {
	if strings.TrimSpace(c.NamesrvAddr) == "" {
		return fmt.Errorf("namesrvAddr: no name server given (-n host:port)")
	}
	if c.GrpcServerPort < 0 || c.GrpcServerPort > 65535 {
		return fmt.Errorf("grpcServerPort: %d is not a port", c.GrpcServerPort)
	}
	if c.RouteTTL <= 0 {
		c.RouteTTL = 3 * time.Second
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = 3 * time.Second
	}
	return nil
}

func (c *Config) nameServers() []string {
	var out []string
	for _, a := range strings.Split(c.NamesrvAddr, ";") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
