package proxy

import (
	"fmt"
	"net/netip"
	"os"

	"rocketraft/config"
)

// LocalConfig is the configuration of the proxy a broker runs in its own process (mqbroker
// --enable-proxy, Apache's local mode): the broker's grpcServerPort, name servers, cluster
// name, ACL file and account, log level and format, TLS settings; it binds where the broker's ports bind
// (brokerIP1 when that is a loopback address, else every interface) and talks remoting to the
// brokers like a standalone proxy, this one included, over the network. The keys of the
// broker's proxyConfigPath file (rmq-proxy.json), when set, override all of these.
func LocalConfig(b *config.Broker) (Config, error) {
	c := DefaultConfig()
	c.NamesrvAddr = b.NamesrvAddr
	c.RocketMQClusterName = b.BrokerClusterName
	c.GrpcServerPort = b.GrpcServerPort
	c.RemotingListenPort = -1 // the broker itself serves 4.x clients
	if a, err := netip.ParseAddr(b.BrokerIP1); err == nil && a.IsLoopback() {
		c.ListenHost = b.BrokerIP1
	}
	c.AclEnable, c.AclConfigFile = b.AclEnable, b.AclConfigFile
	c.AccessKey, c.SecretKey = b.AccessKey, b.SecretKey
	c.LogLevel, c.LogFormat = b.LogLevel, b.LogFormat
	// The broker's TLS: its certificate and mode on the gRPC port (enforcing closes plaintext
	// there too), and tls.enable for the proxy's remoting connections to the brokers.
	c.TLSServerMode = b.TLSServerMode
	if b.TLSServerCertPath != "" {
		c.TLSCertPath, c.TLSKeyPath = b.TLSServerCertPath, b.TLSServerKeyPath
	}
	c.TLSEnable, c.TLSClientAuthServer, c.TLSClientTrustCertPath = b.TLSEnable, b.TLSClientAuthServer, b.TLSClientTrustCertPath
	if b.ProxyConfigPath != "" {
		data, err := os.ReadFile(b.ProxyConfigPath)
		if err != nil {
			return c, fmt.Errorf("proxyConfigPath: %w", err)
		}
		if err := config.ApplyJSON(&c, b.ProxyConfigPath, data); err != nil {
			return c, fmt.Errorf("proxyConfigPath: %w", err)
		}
	}
	return c, nil
}
