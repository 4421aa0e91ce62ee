package config

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Namesrv is the configuration of one mqnamesrv process.
type Namesrv struct {
	// ListenAddr is the remoting address to bind; --listen is accepted as a flag alias.
	// Default 127.0.0.1:9876 (RocketMQ binds all interfaces; set 0.0.0.0:9876 for that).
	ListenAddr string `prop:"listenAddr" alias:"listen" group:"network" help:"remoting address to bind, host:port (also --listen)"`
	// ListenPort is RocketMQ's namesrv key; when non-zero it replaces the port of listenAddr.
	ListenPort int `prop:"listenPort" help:"when non-zero, replaces the port of listenAddr"`
	// BrokerExpiry (ours; RocketMQ's fixed BROKER_CHANNEL_EXPIRED_TIME) drops a broker whose
	// last registration is older than this many ms. Default 120000.
	BrokerExpiry int64 `prop:"brokerExpiry" unit:"milliseconds" help:"drop a broker whose last registration is older than this, ms"`
	// ScanNotActiveBrokerInterval is how often expired brokers are looked for, ms. Default 5000.
	ScanNotActiveBrokerInterval int64 `prop:"scanNotActiveBrokerInterval" unit:"milliseconds" help:"how often expired brokers are looked for, ms"`
	// KvConfigPath is where KV config would be persisted. Default $HOME/namesrv/kvConfig.json.
	KvConfigPath string `prop:"kvConfigPath" group:"store" help:"file the KV configuration is persisted to"`
	// OrderMessageEnable serves orderTopicConf from the KV namespace ORDER_TOPIC_CONFIG.
	OrderMessageEnable bool `prop:"orderMessageEnable" group:"messages" help:"serve orderTopicConf from the ORDER_TOPIC_CONFIG namespace"`
	// AclEnable (RocketMQ's key name): brokers' registrations, unregistrations and the other
	// route and KV writes need a request signed by an admin account of AclConfigFile. Reads
	// (routes, cluster info) stay open: clients need them before anything else.
	AclEnable bool `prop:"aclEnable" group:"security" help:"registrations and route/KV writes need an admin signature"`
	// AclConfigFile is the plain_acl.yml-compatible accounts file (required with AclEnable).
	AclConfigFile string `prop:"aclConfigFile" help:"accounts file (plain_acl.yml format)"`
	// AllowBrokerTakeover (ours): with aclEnable=false, a REGISTER_BROKER that would replace a
	// live registration of the same broker name and id from another address (unless that
	// address is already a member of the group: DLedger failover) and an UNREGISTER_BROKER of a
	// live broker from another connection are refused unless this is true. Default false.
	AllowBrokerTakeover bool `prop:"allowBrokerTakeover" help:"without ACL, let another address replace a live broker's registration"`
	// LogLevel (ours): debug | info | warn | error. Default info.
	LogLevel string `prop:"logLevel" group:"operations" help:"debug | info | warn | error"`
	// LogFormat (ours): text or json (one object per line, for log shippers). Default text.
	LogFormat string `prop:"logFormat" help:"text | json (one object per line)"`
	// HTTPPort (ours) serves Prometheus metrics on /metrics, the status page and its /cluster
	// JSON at this port. Default 0 = off.
	HTTPPort int `prop:"httpPort" help:"HTTP port for /metrics, the status page and /cluster (0 = off)"`
	// HTTPBindAddress (ours) is the IP the HTTP port binds: 127.0.0.1 by default, 0.0.0.0 for a
	// remote Prometheus.
	HTTPBindAddress string `prop:"httpBindAddress" help:"IP the HTTP port binds"`
	// HTTPAuthToken (ours), when set, is required on /metrics and /cluster as
	// "Authorization: Bearer <token>". Default "" = none.
	HTTPAuthToken string `prop:"httpAuthToken" help:"bearer token required on /metrics and /cluster (\"\" = none)"`
	// TLS on the remoting port, as the broker's keys (RocketMQ's TlsSystemConfig names):
	// tls.server.mode disabled (default) | permissive | enforcing, with the PEM certificate and
	// key; the name server refuses to start with TLS on and no certificate.
	TLSServerMode     string `prop:"tls.server.mode" group:"security" help:"TLS on the remoting port: disabled | permissive | enforcing"`
	TLSServerCertPath string `prop:"tls.server.certPath" help:"PEM certificate (chain) the remoting port presents"`
	TLSServerKeyPath  string `prop:"tls.server.keyPath" help:"PEM private key of tls.server.certPath"`
	// TLSEnable (tls.enable) makes the status page's connections to brokers (httpPort) TLS, for
	// brokers whose remoting port enforces TLS; certificates are not verified.
	TLSEnable bool `prop:"tls.enable" help:"the status page's connections to brokers use TLS"`
	// MaxConnections (ours) bounds the open remoting connections; one more is closed at accept
	// with a (rate-limited) log line. Default 10000; -1 = unbounded.
	MaxConnections int `prop:"maxConnections" help:"most open remoting connections (-1 = unbounded)"`
	// StrictConfig (ours): an unknown key in the properties file stops start-up (exit status 2)
	// instead of being logged as a warning. Default false, as RocketMQ ignores such keys.
	StrictConfig bool `prop:"strictConfig" group:"operations" help:"an unknown key in the configuration file stops start-up (exit status 2)"`
}

// NewNamesrv returns a Namesrv holding the defaults.
func NewNamesrv() *Namesrv {
	home, err := os.UserHomeDir()
	if err != nil {
		home = "."
	}
	return &Namesrv{
		ListenAddr:                  "127.0.0.1:9876",
		BrokerExpiry:                120000,
		ScanNotActiveBrokerInterval: 5000,
		KvConfigPath:                filepath.Join(home, "namesrv", "kvConfig.json"),
		LogLevel:                    "info",
		LogFormat:                   "text",
		HTTPBindAddress:             "127.0.0.1",
		TLSServerMode:               "disabled",
		MaxConnections:              10000,
	}
}

// LoadNamesrv builds the name server configuration from defaults, the file named by
// -c/--config and the flags in args (without the program name): --listen/--listenAddr and
// --<key> for every key. Same contract as LoadBroker.
func LoadNamesrv(args []string) (*Namesrv, []string, error) {
	n := NewNamesrv()
	w, err := load("mqnamesrv", n, nil, args)
	if err != nil {
		return nil, w, err
	}
	return n, w, nil
}

// NamesrvUsage is the flag help of mqnamesrv.
func NamesrvUsage() string { return usage("mqnamesrv", NewNamesrv(), nil) }

// Normalize applies listenPort to listenAddr. LoadNamesrv calls it.
func (n *Namesrv) Normalize() []string { return n.normalize() }

func (n *Namesrv) strict() bool { return n.StrictConfig }

func (n *Namesrv) normalize() []string {
	if n.ListenPort != 0 {
		host, _, err := net.SplitHostPort(n.ListenAddr)
		if err != nil {
			host = "127.0.0.1"
		}
		n.ListenAddr = net.JoinHostPort(host, strconv.Itoa(n.ListenPort))
	}
	return nil
}

// Validate checks every key and returns all problems joined (each a *KeyError), or nil.
func (n *Namesrv) Validate() error {
	var errs []error
	if _, port, err := net.SplitHostPort(n.ListenAddr); err != nil {
		errs = append(errs, keyErr("listenAddr", "bad address %q: %v", n.ListenAddr, err))
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		errs = append(errs, keyErr("listenAddr", "bad port in %q", n.ListenAddr))
	}
	if n.ListenPort < 0 || n.ListenPort > 65535 {
		errs = append(errs, keyErr("listenPort", "must be within 0..65535, got %d", n.ListenPort))
	}
	if n.HTTPPort < 0 || n.HTTPPort > 65535 {
		errs = append(errs, keyErr("httpPort", "must be within 0..65535, got %d", n.HTTPPort))
	}
	if err := checkBindAddress(n.HTTPBindAddress); err != nil {
		errs = append(errs, keyErr("httpBindAddress", "%v", err))
	}
	if n.BrokerExpiry <= 0 {
		errs = append(errs, keyErr("brokerExpiry", "must be > 0, got %d", n.BrokerExpiry))
	}
	if n.ScanNotActiveBrokerInterval <= 0 {
		errs = append(errs, keyErr("scanNotActiveBrokerInterval", "must be > 0, got %d", n.ScanNotActiveBrokerInterval))
	}
	if n.AclEnable && n.AclConfigFile == "" {
		errs = append(errs, keyErr("aclConfigFile", "aclEnable=true needs the accounts file (plain_acl.yml format)"))
	}
	validateTLS(n.TLSServerMode, n.TLSServerCertPath, n.TLSServerKeyPath, false, "", func(key, format string, args ...any) {
		errs = append(errs, keyErr(key, format, args...))
	})
	if n.MaxConnections == 0 || n.MaxConnections < -1 {
		errs = append(errs, keyErr("maxConnections", "must be > 0 (or -1 for unbounded), got %d", n.MaxConnections))
	}
	if !validLogFormat(n.LogFormat) {
		errs = append(errs, keyErr("logFormat", "must be text or json, got %q", n.LogFormat))
	}
	if !validLogLevel(n.LogLevel) {
		errs = append(errs, keyErr("logLevel", "must be debug, info, warn or error, got %q", n.LogLevel))
	}
	return joinKeyErrors(errs)
}

// BrokerExpiryDuration is brokerExpiry as a duration.
func (n *Namesrv) BrokerExpiryDuration() time.Duration { return ms(n.BrokerExpiry) }

// ScanInterval is scanNotActiveBrokerInterval as a duration.
func (n *Namesrv) ScanInterval() time.Duration { return ms(n.ScanNotActiveBrokerInterval) }

// HTTPAddr is where the HTTP port listens: httpBindAddress and httpPort; "" when httpPort is 0.
func (n *Namesrv) HTTPAddr() string {
	if n.HTTPPort == 0 {
		return ""
	}
	return net.JoinHostPort(n.HTTPBindAddress, strconv.Itoa(n.HTTPPort))
}
