package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"rocketraft/internal/suggest"
)

// Keyed configuration in JSON: the same `prop`-tagged structs and generated --<key>=<value>
// flags as the daemons' .properties files (load.go), for a program whose configuration file is
// JSON, as Apache's proxy reads rmq-proxy.json. Later wins: the struct's values as given (its
// defaults), the JSON file named by the file flag, then the flags.

// JSONFile describes the flag that names a JSON configuration file: Name is its long form
// (--<Name>), Usage its help text. A single-dash spelling -<Name> is accepted too (Apache's
// mqproxy -pc rmq-proxy.json), which pflag alone would read as a run of one-letter flags.
type JSONFile struct {
	Name  string
	Usage string
}

// LoadJSON applies the JSON file named by the file flag in args (if any) and then the flags in
// args to cfg, a pointer to a struct with `prop` tags whose values are the defaults. shorthands
// maps a key to its one-letter flag (namesrvAddr → n). Unlike a .properties file, an unknown key
// in the file is an error. Every error names the key (a *KeyError inside); ErrHelp for -h. It
// does not validate.
func LoadJSON(name string, cfg any, file JSONFile, shorthands map[string]string, args []string) error {
	fs, configFile, vals := newFlagSetFile(name, cfg, shorthands, fileFlag{name: file.Name, usage: file.Usage})
	if err := parseFlags(fs, cfg, singleDashLong(args, file.Name)); err != nil {
		return err
	}
	if *configFile != "" {
		data, err := os.ReadFile(*configFile)
		if err != nil {
			return fmt.Errorf("-%s: %w", file.Name, err)
		}
		if err := ApplyJSON(cfg, *configFile, data); err != nil {
			return err
		}
	}
	for _, v := range vals {
		if v.set {
			if err := v.f.set(v.f.key, v.raw); err != nil {
				return fmt.Errorf("flag --%w", err)
			}
		}
	}
	return nil
}

// JSONUsage is the flag help of a program loaded with LoadJSON.
func JSONUsage(name string, cfg any, file JSONFile, shorthands map[string]string) string {
	return groupedUsage(name, cfg, shorthands, fileFlag{name: file.Name, usage: file.Usage})
}

// ApplyJSON sets the keys of the JSON object data on cfg. name labels the source in errors.
// Values may be JSON strings, numbers or booleans; each is parsed as its field's type. The
// first unknown key or bad value (in key order) is an error naming it.
func ApplyJSON(cfg any, name string, data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return fmt.Errorf("%s: not a JSON object: %w", name, err)
	}
	idx := index(fieldsOf(cfg))
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f, ok := idx[k]
		if !ok {
			return fmt.Errorf("%s: %w", name, keyErr(k, "unknown key%s", suggest.Hint(k, allKeys(cfg))))
		}
		var text string
		switch v := obj[k].(type) {
		case string:
			text = v
		case json.Number:
			text = v.String()
		case bool:
			text = fmt.Sprint(v)
		default:
			return fmt.Errorf("%s: %w", name, keyErr(k, "want a string, number or boolean, got %s", jsonKind(v)))
		}
		if err := f.set(k, text); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// singleDashLong rewrites -<long> and -<long>=v to their -- forms.
func singleDashLong(args []string, long string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "-"+long || strings.HasPrefix(a, "-"+long+"=") {
			a = "-" + a
		}
		out[i] = a
	}
	return out
}
