package proxy

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"rocketraft/acl"
	"rocketraft/config"
	"rocketraft/remoting"
)

// Config is one proxy's configuration. The `prop` tags are the keys of rmq-proxy.json (Apache
// RocketMQ proxy's names where it has the key); cmd/mqproxy reads them from -pc and from
// --<key>=<value> flags through config.LoadJSON, and docs/proxy.md lists them.
type Config struct {
	// NamesrvAddr lists the name servers, ';'-separated.
	NamesrvAddr string `prop:"namesrvAddr" group:"network" help:"name servers, host:port;host:port"`
	// RocketMQClusterName is the cluster behind the proxy; it labels the proxy's metrics.
	RocketMQClusterName string `prop:"rocketMQClusterName" group:"identity" help:"cluster behind the proxy; labels its metrics"`
	// GrpcServerPort is where RocketMQ 5 clients connect (default 8081).
	GrpcServerPort int `prop:"grpcServerPort" group:"network" help:"gRPC port RocketMQ 5 clients connect to"`
	// ListenHost is the address the gRPC port binds (default 0.0.0.0).
	ListenHost string `prop:"listenHost" help:"address the gRPC port binds"`
	// RemotingListenPort is where RocketMQ 4.x clients connect, using the proxy as their name
	// server and every broker group's address (default 8080; 0 = any free port; -1 = off).
	RemotingListenPort int `prop:"remotingListenPort" help:"remoting port for 4.x clients (0 = any free port, -1 = off)"`
	// TLSCertPath and TLSKeyPath are the PEM certificate and key the gRPC port presents to
	// clients that speak TLS; empty: a self-signed one made at start. Plaintext clients are
	// served on the same port.
	TLSCertPath string `prop:"tlsCertPath" group:"security" help:"PEM certificate of the gRPC port (\"\" = self-signed at start)"`
	TLSKeyPath  string `prop:"tlsKeyPath" help:"PEM private key of tlsCertPath"`
	// TLSServerMode (RocketMQ's tls.server.mode) is the remoting listener's TLS: disabled
	// (default), permissive (TLS and plaintext on one port) or enforcing (TLS only), with the
	// certificate of tlsCertPath/tlsKeyPath, which must then be set (no self-signed fallback).
	// Enforcing also closes plaintext connections to the gRPC port.
	TLSServerMode string `prop:"tls.server.mode" help:"TLS on the remoting listener: disabled | permissive | enforcing"`
	// TLSEnable (RocketMQ's tls.enable) makes the proxy's connections to name servers and
	// brokers TLS; TLSClientAuthServer verifies their certificates against
	// TLSClientTrustCertPath (system roots when empty).
	TLSEnable              bool   `prop:"tls.enable" help:"connections to name servers and brokers use TLS"`
	TLSClientAuthServer    bool   `prop:"tls.client.authServer" help:"verify the certificates of those connections"`
	TLSClientTrustCertPath string `prop:"tls.client.trustCertPath" help:"PEM CA file for tls.client.authServer (\"\" = system roots)"`
	// MaxConnections (ours) bounds the remoting listener's open connections (default 10000;
	// -1 unbounded).
	MaxConnections int `prop:"maxConnections" help:"most open remoting connections (-1 = unbounded)"`
	// GrpcShutdownTimeSeconds bounds a graceful stop: calls in flight get this long to finish
	// (default 30), then the rest are cut.
	GrpcShutdownTimeSeconds int `prop:"grpcShutdownTimeSeconds" group:"operations" unit:"seconds" help:"graceful stop: calls in flight get this long, seconds"`

	// AclEnable checks every call's authorization header against the accounts of AclConfigFile
	// (plain_acl.yml format, the file the brokers read; reloaded when it changes).
	AclEnable     bool   `prop:"aclEnable" group:"security" help:"check every call's signature against aclConfigFile"`
	AclConfigFile string `prop:"aclConfigFile" help:"accounts file (plain_acl.yml format), reloaded when it changes"`
	// AccessKey and SecretKey are the proxy's own account: it signs its requests to name servers
	// and brokers with it, as a 4.x client does. Empty: requests go unsigned.
	AccessKey string `prop:"accessKey" help:"the proxy's own access key, signs its requests (\"\" = unsigned)"`
	SecretKey string `prop:"secretKey" help:"secret key of accessKey"`

	// MetricsExporterType is DISABLE (default) or PROM: Prometheus text on
	// http://<metricsPromExporterHost>:<metricsPromExporterPort>/metrics.
	MetricsExporterType     string `prop:"metricsExporterType" group:"operations" help:"DISABLE | PROM (Prometheus text on /metrics)"`
	MetricsPromExporterHost string `prop:"metricsPromExporterHost" help:"address the metrics port binds (default listenHost)"` // default: listenHost
	MetricsPromExporterPort int    `prop:"metricsPromExporterPort" help:"metrics port (0 = any free port)"`                    // default 5557; 0 = any free port
	// MetricsAuthToken (ours), when set, is required on /metrics as "Authorization: Bearer
	// <token>" (401 otherwise), as httpAuthToken on the broker's and name server's HTTP ports:
	// the metrics port binds every interface by default, as RocketMQ's does.
	MetricsAuthToken string `prop:"metricsAuthToken" help:"bearer token required on /metrics (\"\" = none)"`

	// LogLevel (debug | info | warn | error) and LogFormat (text | json), as the broker's.
	LogLevel  string `prop:"logLevel" help:"debug | info | warn | error"`
	LogFormat string `prop:"logFormat" help:"text | json (one object per line)"`

	// RouteTTL is how long a topic's route is used before it is asked again (default 3 s); a
	// failed send refreshes it at once.
	RouteTTL time.Duration
	// SendTimeout bounds one send to a broker (default 3 s).
	SendTimeout time.Duration
}

// Metrics exporter types.
const (
	MetricsDisable = "DISABLE"
	MetricsProm    = "PROM"
)

// DefaultConfig is a proxy on 8081 with no name server set.
func DefaultConfig() Config {
	return Config{
		RocketMQClusterName: "DefaultCluster", GrpcServerPort: 8081, ListenHost: "0.0.0.0", RemotingListenPort: 8080,
		GrpcShutdownTimeSeconds: 30, MetricsExporterType: MetricsDisable, MetricsPromExporterPort: 5557,
		LogLevel: "info", LogFormat: "text", TLSServerMode: remoting.TLSDisabled, MaxConnections: remoting.DefaultMaxConnections,
		RouteTTL: 3 * time.Second, SendTimeout: 3 * time.Second,
	}
}

// Validate names the first bad key (a *config.KeyError) and fills the derived defaults.
func (c *Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return &config.KeyError{Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	if len(c.nameServers()) == 0 {
		return bad("namesrvAddr", "no name server given (-n host:port)")
	}
	for _, a := range c.nameServers() {
		if _, p, err := net.SplitHostPort(a); err != nil || !isPort(p) {
			return bad("namesrvAddr", "bad address %q (want host:port)", a)
		}
	}
	if c.GrpcServerPort < 0 || c.GrpcServerPort > 65535 {
		return bad("grpcServerPort", "%d is not a port", c.GrpcServerPort)
	}
	if c.RemotingListenPort < -1 || c.RemotingListenPort > 65535 {
		return bad("remotingListenPort", "%d is not a port (-1 turns the remoting listener off)", c.RemotingListenPort)
	}
	if c.MetricsPromExporterPort < 0 || c.MetricsPromExporterPort > 65535 {
		return bad("metricsPromExporterPort", "%d is not a port", c.MetricsPromExporterPort)
	}
	switch strings.ToUpper(c.MetricsExporterType) {
	case "", MetricsDisable, MetricsProm:
		c.MetricsExporterType = strings.ToUpper(c.MetricsExporterType)
	default:
		return bad("metricsExporterType", "%q: want DISABLE or PROM", c.MetricsExporterType)
	}
	if (c.TLSCertPath == "") != (c.TLSKeyPath == "") {
		return bad("tlsKeyPath", "tlsCertPath and tlsKeyPath go together")
	}
	mode, err := remoting.ParseTLSMode(c.TLSServerMode)
	if err != nil {
		return bad("tls.server.mode", "%v", err)
	}
	c.TLSServerMode = mode
	if mode != remoting.TLSDisabled && c.TLSCertPath == "" {
		return bad("tlsCertPath", "tls.server.mode=%s needs tlsCertPath and tlsKeyPath", mode)
	}
	if c.MaxConnections == 0 || c.MaxConnections < -1 {
		return bad("maxConnections", "must be > 0 (or -1 for unbounded), got %d", c.MaxConnections)
	}
	if c.GrpcShutdownTimeSeconds < 0 {
		return bad("grpcShutdownTimeSeconds", "must be >= 0, got %d", c.GrpcShutdownTimeSeconds)
	}
	if c.AclEnable && strings.TrimSpace(c.AclConfigFile) == "" {
		return bad("aclConfigFile", "aclEnable=true needs the accounts file (plain_acl.yml format)")
	}
	switch {
	case c.AccessKey == "" && c.SecretKey == "":
	case c.AccessKey == "" || c.SecretKey == "":
		return bad("accessKey", "accessKey and secretKey must be set together")
	default:
		if err := acl.CheckCredentials(c.AccessKey, c.SecretKey); err != nil {
			return bad("secretKey", "%v", err)
		}
	}
	switch strings.ToLower(c.LogLevel) {
	case "", "debug", "info", "warn", "error":
	default:
		return bad("logLevel", "%q: want debug, info, warn or error", c.LogLevel)
	}
	switch strings.ToLower(c.LogFormat) {
	case "", "text", "json":
	default:
		return bad("logFormat", "%q: want text or json", c.LogFormat)
	}
	if c.RouteTTL <= 0 {
		c.RouteTTL = 3 * time.Second
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = 3 * time.Second
	}
	return nil
}

func isPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && n <= 65535
}

// shutdownGrace is how long a graceful stop waits for calls in flight.
func (c *Config) shutdownGrace() time.Duration {
	return time.Duration(c.GrpcShutdownTimeSeconds) * time.Second
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
