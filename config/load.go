package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/magiconair/properties"
	"github.com/spf13/pflag"

	"rocketraft/internal/suggest"
)

// ErrHelp is returned by LoadBroker and LoadNamesrv when -h/--help was given; the caller prints
// BrokerUsage / NamesrvUsage and exits 0.
var ErrHelp = pflag.ErrHelp

// ErrVersion is returned by LoadBroker, LoadNamesrv and LoadJSON when --version was given; the
// caller prints internal/version's line and exits 0.
var ErrVersion = errors.New("version requested")

// target is what LoadBroker and LoadNamesrv have in common.
type target interface {
	// normalize fills values derived from other keys and returns warnings.
	normalize() []string
	Validate() error
	// strict reports strictConfig: an unknown key stops start-up instead of being a warning.
	strict() bool
}

// flagValue is the pflag.Value behind every generated --<key> flag. It only records the text;
// the field is set after the properties file has been applied, so flags win.
type flagValue struct {
	f   field
	def string
	raw string
	set bool
}

func (v *flagValue) String() string {
	if v.set {
		return v.raw
	}
	return v.def
}

func (v *flagValue) Set(s string) error { v.raw, v.set = s, true; return nil }
func (v *flagValue) Type() string       { return v.f.typeName() }

// shownAliases are aliases listed in the usage (the others are old spellings, accepted but
// hidden).
var shownAliases = map[string]bool{"listen": true, "enable-proxy": true}

// fileFlag names the flag that points at a daemon's configuration file.
type fileFlag struct {
	name, short, usage string
}

// propertiesFile is -c/--config, the .properties file of mqbroker and mqnamesrv.
var propertiesFile = fileFlag{"config", "c", "properties file (RocketMQ key names); flags override it"}

// newFlagSet defines -c/--config and one flag per tagged field of cfg (its current values are
// shown as defaults). shorthands maps a key to its one-letter flag (namesrvAddr → n).
func newFlagSet(name string, cfg any, shorthands map[string]string) (*pflag.FlagSet, *string, []*flagValue) {
	return newFlagSetFile(name, cfg, shorthands, propertiesFile)
}

// newFlagSetFile is newFlagSet with another configuration-file flag.
func newFlagSetFile(name string, cfg any, shorthands map[string]string, file fileFlag) (*pflag.FlagSet, *string, []*flagValue) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, usage is printed by the caller
	fs.SortFlags = false
	configFile := fs.StringP(file.name, file.short, "", file.usage)
	addSwitch(fs, versionFlag, "", versionUsage)
	var vals []*flagValue
	for _, f := range fieldsOf(cfg) {
		vals = append(vals, addFieldFlag(fs, f, shorthands[f.key]))
	}
	return fs, configFile, vals
}

// versionFlag is the --version flag every daemon has.
const versionFlag = "version"

const versionUsage = "print the version, commit, Go version and build date, then exit"

// switchValue is a boolean flag shown in the usage as a bare switch ("--version"), as the key
// flags are; pflag's own bool flags are shown as "--version[=true|false]".
type switchValue bool

func (s *switchValue) Set(v string) error {
	switch strings.ToLower(v) {
	case "true":
		*s = true
	case "false":
		*s = false
	default:
		return fmt.Errorf("invalid boolean %q (want true or false)", v)
	}
	return nil
}
func (s *switchValue) String() string { return fmt.Sprint(bool(*s)) }
func (s *switchValue) Type() string   { return "bool" }

// addSwitch defines a switchValue flag on fs.
func addSwitch(fs *pflag.FlagSet, name, short, usage string) *switchValue {
	v := new(switchValue)
	fs.VarPF(v, name, short, usage).NoOptDefVal = "true"
	return v
}

// addFieldFlag defines --<key> (and its aliases) for f on fs.
func addFieldFlag(fs *pflag.FlagSet, f field, shorthand string) *flagValue {
	v := &flagValue{f: f, def: f.String()}
	fl := fs.VarPF(v, f.key, shorthand, f.help)
	if f.v.Kind() == reflect.Bool {
		fl.NoOptDefVal = "true"
	}
	for _, a := range f.aliases {
		al := fs.VarPF(v, a, "", "alias of --"+f.key)
		al.NoOptDefVal = fl.NoOptDefVal
		if !shownAliases[a] {
			_ = fs.MarkHidden(a)
		}
	}
	return v
}

// parseFlags parses args into fs, turning --version into ErrVersion and an unknown flag's error
// into one with the closest known flags.
func parseFlags(fs *pflag.FlagSet, cfg any, args []string) error {
	if err := fs.Parse(args); err != nil {
		return unknownFlagHint(err, cfg)
	}
	if fl := fs.Lookup(versionFlag); fl != nil && fl.Value.String() == "true" {
		return ErrVersion
	}
	if rest := fs.Args(); len(rest) > 0 {
		return fmt.Errorf("unexpected argument %q (flags take the form --key=value)", rest[0])
	}
	return nil
}

// unknownFlagHint adds "did you mean" to pflag's "unknown flag: --x" error.
func unknownFlagHint(err error, cfg any) error {
	const prefix = "unknown flag: --"
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		return err
	}
	name := strings.TrimPrefix(msg, prefix)
	return fmt.Errorf("%w%s", err, suggest.Hint(name, allKeys(cfg)))
}

// allKeys lists every key and alias of cfg.
func allKeys(cfg any) []string {
	var out []string
	for _, f := range fieldsOf(cfg) {
		out = append(out, f.key)
		out = append(out, f.aliases...)
	}
	return out
}

// unknownKey is the message for a key no field has, with the closest known keys.
func unknownKey(name, key string, cfg any) string {
	return fmt.Sprintf("%s: unknown key %q ignored%s", name, key, suggest.Hint(key, allKeys(cfg)))
}

// load applies, in order, the properties file named by -c/--config and the flags in args
// (args excludes the program name), then normalizes and validates cfg.
func load(name string, cfg target, shorthands map[string]string, args []string) ([]string, error) {
	fs, configFile, vals := newFlagSet(name, cfg, shorthands)
	if err := parseFlags(fs, cfg, args); err != nil {
		return nil, err
	}
	var unknown []string
	if *configFile != "" {
		u, err := applyFile(cfg, *configFile)
		if err != nil {
			return nil, err
		}
		unknown = u
	}
	for _, v := range vals {
		if v.set {
			if err := v.f.set(v.f.key, v.raw); err != nil {
				return nil, fmt.Errorf("flag --%w", err)
			}
		}
	}
	if len(unknown) > 0 && cfg.strict() {
		return nil, fmt.Errorf("%s (strictConfig=true: unknown keys stop start-up)", strings.Join(unknown, "; "))
	}
	warnings := append(unknown, cfg.normalize()...)
	if err := cfg.Validate(); err != nil {
		addUnits(cfg, err)
		return warnings, err
	}
	return warnings, nil
}

// applyFile sets every key of a .properties file on cfg and returns one message per unknown
// key; a value that does not parse is an error naming the file, the key and the value.
func applyFile(cfg any, path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	return ApplyProperties(cfg, path, data)
}

// ApplyProperties sets the keys of the .properties text data on cfg (a *Broker or *Namesrv).
// name labels the source in messages. It returns one warning per unknown key (naming the
// closest known keys: "did you mean") and an error
// (wrapping a *KeyError) for the first value that does not parse. It does not normalize or
// validate.
func ApplyProperties(cfg any, name string, data []byte) ([]string, error) {
	l := &properties.Loader{Encoding: properties.UTF8, DisableExpansion: true}
	p, err := l.LoadBytes(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	idx := index(fieldsOf(cfg))
	var warnings []string
	for _, k := range p.Keys() {
		val, _ := p.Get(k)
		f, ok := idx[k]
		if !ok {
			warnings = append(warnings, unknownKey(name, k, cfg))
			continue
		}
		if err := f.set(k, val); err != nil {
			return warnings, fmt.Errorf("%s: %w", name, err)
		}
	}
	return warnings, nil
}

// usage renders the flag help of a daemon.
func usage(name string, cfg any, shorthands map[string]string) string {
	return groupedUsage(name, cfg, shorthands, propertiesFile)
}

// helpGroups are the --help sections, in order, and their titles; a field's group tag names
// one (fields without one follow the previous field's).
var helpGroups = []struct{ key, title string }{
	{"identity", "Identity"},
	{"network", "Network"},
	{"store", "Store"},
	{"messages", "Topics, messages and consumers"},
	{"dledger", "DLedger (Raft replication)"},
	{"ha", "Classic HA (master/slave)"},
	{"proxy", "Local proxy"},
	{"security", "ACL and security"},
	{"operations", "Operations (HTTP, logs, limits)"},
}

// groupedUsage renders the general flags (configuration file, --version, --help), then one
// section per help group with its keys' flags and meanings.
func groupedUsage(name string, cfg any, shorthands map[string]string, file fileFlag) string {
	var b strings.Builder
	b.WriteString("Usage of " + name + ":\n")
	gen := pflag.NewFlagSet(name, pflag.ContinueOnError)
	gen.StringP(file.name, file.short, "", file.usage)
	addSwitch(gen, versionFlag, "", versionUsage)
	addSwitch(gen, "help", "h", "print this help, grouped by subject")
	b.WriteString(gen.FlagUsages())
	fields := fieldsOf(cfg)
	done := map[string]bool{}
	section := func(key, title string) {
		fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
		fs.SortFlags = false
		for _, f := range fields {
			if f.group == key {
				addFieldFlag(fs, f, shorthands[f.key])
			}
		}
		if u := fs.FlagUsages(); u != "" {
			b.WriteString("\n" + title + ":\n" + u)
		}
		done[key] = true
	}
	for _, g := range helpGroups {
		section(g.key, g.title)
	}
	for _, f := range fields {
		if !done[f.group] {
			section(f.group, f.group)
		}
	}
	return b.String()
}

// joinKeyErrors returns nil for no errors, and errors.Join otherwise.
func joinKeyErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errors.Join(errs...)
}
