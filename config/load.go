package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"

	"github.com/magiconair/properties"
	"github.com/spf13/pflag"
)

// ErrHelp is returned by LoadBroker and LoadNamesrv when -h/--help was given; the caller prints
// BrokerUsage / NamesrvUsage and exits 0.
var ErrHelp = pflag.ErrHelp

// target is what LoadBroker and LoadNamesrv have in common.
type target interface {
	// normalize fills values derived from other keys and returns warnings.
	normalize() []string
	Validate() error
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
	var vals []*flagValue
	for _, f := range fieldsOf(cfg) {
		v := &flagValue{f: f, def: f.String()}
		fl := fs.VarPF(v, f.key, shorthands[f.key], "property "+f.key)
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
		vals = append(vals, v)
	}
	return fs, configFile, vals
}

// load applies, in order, the properties file named by -c/--config and the flags in args
// (args excludes the program name), then normalizes and validates cfg.
func load(name string, cfg target, shorthands map[string]string, args []string) ([]string, error) {
	fs, configFile, vals := newFlagSet(name, cfg, shorthands)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if rest := fs.Args(); len(rest) > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags take the form --key=value)", rest[0])
	}
	var warnings []string
	if *configFile != "" {
		w, err := applyFile(cfg, *configFile)
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, w...)
	}
	for _, v := range vals {
		if v.set {
			if err := v.f.set(v.f.key, v.raw); err != nil {
				return nil, fmt.Errorf("flag --%w", err)
			}
		}
	}
	warnings = append(warnings, cfg.normalize()...)
	if err := cfg.Validate(); err != nil {
		return warnings, err
	}
	return warnings, nil
}

// applyFile sets every key of a .properties file on cfg. Unknown keys become warnings; a
// value that does not parse is an error naming the file, the key and the value.
func applyFile(cfg any, path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	return ApplyProperties(cfg, path, data)
}

// ApplyProperties sets the keys of the .properties text data on cfg (a *Broker or *Namesrv).
// name labels the source in messages. It returns one warning per unknown key and an error
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
			warnings = append(warnings, fmt.Sprintf("%s: unknown key %q ignored", name, k))
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
	fs, _, _ := newFlagSet(name, cfg, shorthands)
	return "Usage of " + name + ":\n" + fs.FlagUsages()
}

// joinKeyErrors returns nil for no errors, and errors.Join otherwise.
func joinKeyErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errors.Join(errs...)
}
