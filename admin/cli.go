package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"rocketraft/internal/version"
)

// command is one mqadmin sub-command: its name, a one-line summary, and setup, which registers the
// command's own flags and returns the function that runs it once the flags are parsed.
type command struct {
	name    string
	summary string
	args    string // synopsis of the command's own flags
	setup   func(fs *pflag.FlagSet) func(ctx context.Context, t *Tool) error
	// rewrite, if set, adjusts the command's arguments before parsing (Java spellings).
	rewrite func(args []string) []string
}

// commands is the dispatch table, in the order help lists them.
var commands = []*command{
	updateTopicCommand,
	deleteTopicCommand,
	topicListCommand,
	topicRouteCommand,
	topicStatusCommand,
	clusterListCommand,
	brokerStatusCommand,
	getBrokerConfigCommand,
	updateBrokerConfigCommand,
	clusterRTCommand,
	wipeWritePermCommand,
	addWritePermCommand,
	consumerProgressCommand,
	statsAllCommand,
	queryMsgByKeyCommand,
	queryMsgByIDCommand,
	queryMsgByUniqueKeyCommand,
	queryMsgByOffsetCommand,
	sendMessageCommand,
	consumeMessageCommand,
	resetOffsetByTimeCommand,
	updateSubGroupCommand,
	deleteSubGroupCommand,
	consumerConnectionCommand,
	producerConnectionCommand,
	raftStatusCommand,
	transferLeaderCommand,
	addPeerCommand,
	removePeerCommand,
	haStatusCommand,
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// Usage returns the text of `mqadmin help`.
func Usage() string {
	var sb strings.Builder
	sb.WriteString("Usage: mqadmin <command> [options]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&sb, "  %-20s %s\n", c.name, c.summary)
	}
	sb.WriteString("  help [command]       Print this text or a command's options\n")
	sb.WriteString("\nCommon options:\n")
	sb.WriteString(commonFlags(&globalOptions{}).FlagUsages())
	sb.WriteString("\nRun 'mqadmin <command> -h' for a command's options.\n")
	return sb.String()
}

// globalOptions are the flags every command accepts.
type globalOptions struct {
	namesrv string
	output  string
	timeout time.Duration
	tls     bool
}

func commonFlags(g *globalOptions) *pflag.FlagSet {
	fs := pflag.NewFlagSet("common", pflag.ContinueOnError)
	fs.StringVarP(&g.namesrv, "namesrvAddr", "n", "", "name server address list, 'host:port;host:port' (default $NAMESRV_ADDR)")
	fs.StringVarP(&g.output, "output", "o", FormatTable, "output format: table or json")
	fs.DurationVar(&g.timeout, "timeout", DefaultTimeout, "bound on each remote call")
	fs.BoolVar(&g.tls, "tls", false, "connect over TLS (ports with tls.server.mode permissive or enforcing; certificates are not verified)")
	return fs
}

// newFlagSet builds a command's flag set: its own flags, then the common ones.
func newFlagSet(c *command, g *globalOptions) (*pflag.FlagSet, func(ctx context.Context, t *Tool) error) {
	fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	run := c.setup(fs)
	fs.AddFlagSet(commonFlags(g))
	return fs, run
}

func commandUsage(c *command) string {
	fs, _ := newFlagSet(c, &globalOptions{})
	return fmt.Sprintf("Usage: mqadmin %s %s\n\n%s.\n\nOptions:\n%s", c.name, c.args, c.summary, fs.FlagUsages())
}

// Main runs one mqadmin command line (without the program name), writing results to stdout and
// diagnostics to stderr, and returns the exit status: 0 success, 1 failure, 2 bad command line.
// The name server list defaults to $NAMESRV_ADDR; with $ROCKETMQ_ACCESS_KEY and
// $ROCKETMQ_SECRET_KEY set, every request is signed with that ACL account.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, Usage())
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help":
		if len(args) > 1 {
			c := lookup(args[1])
			if c == nil {
				fmt.Fprint(stderr, unknownCommand(args[1]))
				return 2
			}
			fmt.Fprint(stdout, commandUsage(c))
			return 0
		}
		fmt.Fprint(stdout, Usage())
		return 0
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, version.Line("mqadmin"))
		return 0
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprint(stderr, unknownCommand(name))
		return 2
	}
	var g globalOptions
	fs, run := newFlagSet(c, &g)
	cmdArgs := args[1:]
	if c.rewrite != nil {
		cmdArgs = c.rewrite(slices.Clone(cmdArgs))
	}
	if err := fs.Parse(cmdArgs); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stdout, commandUsage(c))
			return 0
		}
		fmt.Fprintf(stderr, "mqadmin %s: %v\nRun 'mqadmin %s -h' for usage.\n", name, err, name)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mqadmin %s: unexpected arguments %q\nRun 'mqadmin %s -h' for usage.\n", name, fs.Args(), name)
		return 2
	}
	if g.output != FormatTable && g.output != FormatJSON {
		fmt.Fprintf(stderr, "mqadmin %s: -o must be table or json, not %q\n", name, g.output)
		return 2
	}
	if g.timeout <= 0 {
		fmt.Fprintf(stderr, "mqadmin %s: --timeout must be positive\n", name)
		return 2
	}
	if !fs.Changed("namesrvAddr") {
		g.namesrv = os.Getenv("NAMESRV_ADDR")
	}
	// Credentials come from the environment, never from flags (which other users can see).
	t := New(Config{NamesrvAddrs: ParseNamesrvAddrs(g.namesrv), Timeout: g.timeout, Format: g.output, Out: stdout, Err: stderr,
		AccessKey: os.Getenv(EnvAccessKey), SecretKey: os.Getenv(EnvSecretKey), TLS: g.tls})
	defer t.Close()
	if err := run(ctx, t); err != nil {
		fmt.Fprintf(stderr, "mqadmin %s: %v\n", name, err)
		if h := refusedHint(err, t.cfg.NamesrvAddrs); h != "" {
			fmt.Fprintf(stderr, "mqadmin %s: %s", name, h)
		}
		if errors.Is(err, ErrUsage) {
			fmt.Fprintf(stderr, "Run 'mqadmin %s -h' for usage.\n", name)
			return 2
		}
		return 1
	}
	return 0
}

// required returns a usage error naming the first flag of names that is empty.
func required(fs *pflag.FlagSet, names ...string) error {
	for _, n := range names {
		f := fs.Lookup(n)
		if f != nil && f.Value.String() == "" {
			if f.Shorthand != "" {
				return usagef("-%s/--%s is required", f.Shorthand, f.Name)
			}
			return usagef("--%s is required", f.Name)
		}
	}
	return nil
}

// Environment variables holding the ACL account mqadmin signs with (brokers and name servers
// with aclEnable); admin commands need an admin account.
const (
	EnvAccessKey = "ROCKETMQ_ACCESS_KEY"
	EnvSecretKey = "ROCKETMQ_SECRET_KEY"
)
