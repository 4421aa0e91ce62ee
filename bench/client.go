package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/sirupsen/logrus"
)

// Common holds the settings shared by all subcommands.
type Common struct {
	// NameServers lists name server addresses separated by ';' (or ',').
	// Host names are resolved here: the client accepts only IP:port.
	NameServers string
	// Topic is the topic to produce to or consume from.
	Topic string
	// Duration bounds the run; 0 means until another stop condition or
	// an interrupt.
	Duration time.Duration
	// Warmup is excluded from the summary.
	Warmup time.Duration
	// Interval is the reporting period (default 1s).
	Interval time.Duration
	// JSON prints the summary as one JSON line on Out, and everything
	// else on Log.
	JSON bool
	// Quiet suppresses per-interval lines.
	Quiet bool
	// MaxPrintedErrors is how many errors are printed as they happen.
	MaxPrintedErrors int
	// ClientLogLevel is the rocketmq client's log level: debug, info,
	// warn, error, fatal or off.
	ClientLogLevel string
	// ClientLogFile, if set, sends the client's log to this file.
	ClientLogFile string
	// Client is ClientOfficial (default), ClientNative or ClientGRPC.
	Client string
	// Endpoint is the proxy's gRPC address(es), ';'-separated, for ClientGRPC.
	Endpoint string
	// GRPCTLS makes ClientGRPC dial TLS (the 5.x client's own default) instead of plaintext.
	GRPCTLS bool
	// Connections is the number of remoting clients, each with its own
	// connection to every broker, that the native client spreads its
	// requests over (default 2). The official client ignores it.
	Connections int
}

// SetupClientLog installs the rocketmq client's logger: logrus at the given
// level (debug, info, warn, error, fatal, or off to discard everything),
// writing to stderr or, if file is set, appending to that file. It must be
// called before any client object is created, and overrides the client's
// own ROCKETMQ_GO_LOG_LEVEL variable. (rlog.SetLogLevel alone would map an
// unknown level to "info" silently, and cannot turn logging off.)
func SetupClientLog(level, file string) error {
	var lv logrus.Level
	discard := false
	switch strings.ToLower(level) {
	case "off", "none", "silent":
		lv, discard = logrus.PanicLevel, true
	case "debug":
		lv = logrus.DebugLevel
	case "info":
		lv = logrus.InfoLevel
	case "warn", "warning":
		lv = logrus.WarnLevel
	case "error":
		lv = logrus.ErrorLevel
	case "fatal":
		lv = logrus.FatalLevel
	default:
		return fmt.Errorf("unknown client log level %q (want debug, info, warn, error, fatal or off)", level)
	}
	var out io.Writer = os.Stderr
	if discard {
		out = io.Discard
	} else if file != "" {
		f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("client log file: %w", err)
		}
		out = f // kept open for the life of the process
	}
	// rlog's logger variable is not synchronised: install ours once, then
	// only reconfigure it (logrus' setters are goroutine-safe).
	clientLogOnce.Do(func() {
		theClientLogger = &clientLogger{l: logrus.New()}
		rlog.SetLogger(theClientLogger)
	})
	theClientLogger.l.SetLevel(lv)
	theClientLogger.l.SetOutput(out)
	return nil
}

var (
	clientLogOnce   sync.Once
	theClientLogger *clientLogger
)

// clientLogger adapts a logrus.Logger to rlog.Logger. Unlike the client's
// default logger, Fatal does not exit the process.
type clientLogger struct{ l *logrus.Logger }

func (c *clientLogger) Debug(msg string, f map[string]interface{}) {
	c.l.WithFields(f).Debug(msg)
}

func (c *clientLogger) Info(msg string, f map[string]interface{}) {
	c.l.WithFields(f).Info(msg)
}

func (c *clientLogger) Warning(msg string, f map[string]interface{}) {
	c.l.WithFields(f).Warning(msg)
}

func (c *clientLogger) Error(msg string, f map[string]interface{}) {
	c.l.WithFields(f).Error(msg)
}

func (c *clientLogger) Fatal(msg string, f map[string]interface{}) {
	if c.l.IsLevelEnabled(logrus.FatalLevel) {
		c.l.WithFields(f).Error("FATAL: " + msg)
	}
}

func (c *clientLogger) Level(level string) {
	if lv, err := logrus.ParseLevel(level); err == nil {
		c.l.SetLevel(lv)
	}
}

func (c *clientLogger) OutputPath(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	c.l.SetOutput(f)
	return nil
}

// ResolveNameServers splits a ';'- or ','-separated address list and turns
// host names into IP addresses, because the client rejects anything but
// IP:port (primitive.NamesrvAddr.Check).
func ResolveNameServers(list string) ([]string, error) {
	var out []string
	for _, a := range strings.FieldsFunc(list, func(r rune) bool { return r == ';' || r == ',' || r == ' ' }) {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("name server %q: %w", a, err)
		}
		if net.ParseIP(host) == nil {
			ips, err := net.LookupIP(host)
			if err != nil || len(ips) == 0 {
				return nil, fmt.Errorf("name server %q: cannot resolve %q: %v", a, host, err)
			}
			chosen := ips[0]
			for _, ip := range ips {
				if ip.To4() != nil {
					chosen = ip
					break
				}
			}
			host = chosen.String()
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no name server address given")
	}
	return out, nil
}

// nsResolver returns a resolver for the given addresses. It bypasses the
// default HTTP resolver, which would otherwise try an Alibaba address.
func nsResolver(addrs []string) primitive.NsResolver {
	return primitive.NewPassthroughResolver(addrs)
}

// instanceName returns a client instance name unique to this process. The
// client shares one connection set (an "MQClientInstance") among all
// producers and consumers with the same ClientIP@InstanceName, so distinct
// names are what gives each producer its own TCP connection.
func instanceName(role string, i int) string {
	return fmt.Sprintf("mqbench_%s_%d_%d_%d", role, os.Getpid(), time.Now().UnixNano(), i)
}

// CreateTopicOptions describes an explicit topic creation.
type CreateTopicOptions struct {
	// Brokers lists broker addresses (';'- or ','-separated) to create
	// the topic on.
	Brokers string
	// Queues is the number of read and write queues.
	Queues int
}

// CreateTopic creates topic on every broker in o.Brokers through the
// client's admin API (RequestCode UPDATE_AND_CREATE_TOPIC). Note that the
// admin client does not check the response code: a broker that answers
// with an error is not reported as a failure, only transport errors are.
func CreateTopic(ctx context.Context, nameServers []string, topic string, o CreateTopicOptions) error {
	brokers, err := ResolveNameServers(o.Brokers) // same host:port syntax
	if err != nil {
		return fmt.Errorf("broker address: %w", err)
	}
	adm, err := admin.NewAdmin(admin.WithResolver(nsResolver(nameServers)))
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	defer adm.Close()
	q := o.Queues
	if q <= 0 {
		q = 8
	}
	for _, b := range brokers {
		err := adm.CreateTopic(ctx,
			admin.WithTopicCreate(topic),
			admin.WithBrokerAddrCreate(b),
			admin.WithReadQueueNums(q),
			admin.WithWriteQueueNums(q),
		)
		if err != nil {
			return fmt.Errorf("create topic %s on %s: %w", topic, b, err)
		}
	}
	return nil
}
