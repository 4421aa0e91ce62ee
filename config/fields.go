package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// KeyError is an error about one configuration key: a value that does not parse, or a value
// that fails validation. Its text always starts with the key: `brokerId: invalid integer "x"`.
type KeyError struct {
	Key string
	Msg string
}

func (e *KeyError) Error() string { return e.Key + ": " + e.Msg }

func keyErr(key, format string, args ...any) error {
	return &KeyError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// field is one tagged, settable struct field.
type field struct {
	key     string   // primary RocketMQ key
	aliases []string // other accepted spellings
	help    string   // one-line meaning (help tag), shown by --help
	group   string   // help section (group tag, carried to the following fields)
	unit    string   // unit of an integer value (unit tag), stated in errors about it
	v       reflect.Value
}

// fieldsOf lists the tagged fields of *cfg in declaration order. It panics if cfg is not a
// pointer to a struct or a tagged field has an unsupported type: both are programming errors.
func fieldsOf(cfg any) []field {
	rv := reflect.ValueOf(cfg)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("config: want pointer to struct, got %T", cfg))
	}
	rv = rv.Elem()
	rt := rv.Type()
	var out []field
	group := ""
	for i := 0; i < rt.NumField(); i++ {
		sf := rt.Field(i)
		key, ok := sf.Tag.Lookup("prop")
		if !ok || key == "" || key == "-" {
			continue
		}
		switch sf.Type.Kind() {
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int64:
		default:
			panic(fmt.Sprintf("config: field %s (%s) has unsupported type %s", sf.Name, key, sf.Type))
		}
		if g := sf.Tag.Get("group"); g != "" {
			group = g
		}
		f := field{key: key, v: rv.Field(i), help: sf.Tag.Get("help"), group: group, unit: sf.Tag.Get("unit")}
		if f.unit == "" {
			f.unit = unitFromName(key)
		}
		if a := sf.Tag.Get("alias"); a != "" {
			f.aliases = strings.Split(a, ",")
		}
		out = append(out, f)
	}
	return out
}

// index maps every key and alias to its field.
func index(fs []field) map[string]field {
	m := make(map[string]field, len(fs))
	for _, f := range fs {
		m[f.key] = f
		for _, a := range f.aliases {
			m[a] = f
		}
	}
	return m
}

// set parses s according to the field's type and stores it. key is the spelling the user
// wrote, used in the error text.
func (f field) set(key, s string) error {
	s = strings.TrimSpace(s)
	switch f.v.Kind() {
	case reflect.String:
		f.v.SetString(s)
	case reflect.Bool:
		switch strings.ToLower(s) {
		case "true":
			f.v.SetBool(true)
		case "false":
			f.v.SetBool(false)
		default:
			return keyErr(key, "invalid boolean %q (want true or false)", s)
		}
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return keyErr(key, "invalid integer %q%s", s, f.unitNote())
		}
		if f.v.OverflowInt(n) {
			return keyErr(key, "integer %q out of range%s", s, f.unitNote())
		}
		f.v.SetInt(n)
	}
	return nil
}

// unitNote is " (unit: hours)" for a field with a unit, "" otherwise.
func (f field) unitNote() string {
	if f.unit == "" {
		return ""
	}
	return " (unit: " + f.unit + ")"
}

// unitFromName guesses the unit of an untagged key from RocketMQ's naming habits: *Ms, *Millis,
// *Mills are milliseconds, *Sec/*Seconds seconds, *MB mebibytes. "" when the name says nothing.
func unitFromName(key string) string {
	switch {
	case strings.HasSuffix(key, "Ms"), strings.HasSuffix(key, "Millis"), strings.HasSuffix(key, "Mills"):
		return "milliseconds"
	case strings.HasSuffix(key, "Sec"), strings.HasSuffix(key, "Seconds"):
		return "seconds"
	case strings.HasSuffix(key, "MB"):
		return "MiB"
	}
	return ""
}

// addUnits appends the key's unit to every *KeyError inside err (a single error or an
// errors.Join tree) whose key has one that the message does not already state, so a rejected
// value says how it is read: `fileReservedTime: must be > 0, got -1 (unit: hours)`.
func addUnits(cfg any, err error) {
	if err == nil {
		return
	}
	units := map[string]string{}
	for _, f := range fieldsOf(cfg) {
		if f.unit != "" {
			units[f.key] = f.unit
			for _, a := range f.aliases {
				units[a] = f.unit
			}
		}
	}
	var walk func(error)
	walk = func(e error) {
		if ke, ok := e.(*KeyError); ok {
			if u := units[ke.Key]; u != "" && !strings.Contains(ke.Msg, "(unit: ") {
				ke.Msg += " (unit: " + u + ")"
			}
			return
		}
		switch w := e.(type) {
		case interface{ Unwrap() []error }:
			for _, c := range w.Unwrap() {
				walk(c)
			}
		case interface{ Unwrap() error }:
			walk(w.Unwrap())
		}
	}
	walk(err)
}

// MissingHelp lists the keys of cfg (a pointer to a struct with prop tags) whose help tag is
// empty or only restates the key ("property X"); tests of each binary keep it empty.
func MissingHelp(cfg any) []string {
	var out []string
	for _, f := range fieldsOf(cfg) {
		h := strings.TrimSpace(f.help)
		if h == "" || strings.EqualFold(h, "property "+f.key) || strings.EqualFold(h, f.key) || f.group == "" {
			out = append(out, f.key)
		}
	}
	return out
}

// String formats the field's current value the way it would be written in a properties file.
func (f field) String() string {
	switch f.v.Kind() {
	case reflect.String:
		return f.v.String()
	case reflect.Bool:
		return strconv.FormatBool(f.v.Bool())
	default:
		return strconv.FormatInt(f.v.Int(), 10)
	}
}

// typeName is the type shown in flag usage.
func (f field) typeName() string {
	switch f.v.Kind() {
	case reflect.Bool:
		return "bool"
	case reflect.String:
		return "string"
	default:
		return "int"
	}
}

// Set stores value under key in cfg (a *Broker or *Namesrv), exactly as a properties file
// line would. known is false when no field has that key or alias; err names the key when the
// value does not parse.
func Set(cfg any, key, value string) (known bool, err error) {
	f, ok := index(fieldsOf(cfg))[key]
	if !ok {
		return false, nil
	}
	return true, f.set(key, value)
}

// Keys lists the primary property keys of cfg (a *Broker or *Namesrv) in declaration order.
func Keys(cfg any) []string {
	var out []string
	for _, f := range fieldsOf(cfg) {
		out = append(out, f.key)
	}
	return out
}

// Properties renders every key of cfg as `key=value` lines in declaration order (the effective
// configuration, e.g. for a start-up log line or a -p/--printConfigItem flag).
func Properties(cfg any) string {
	var b strings.Builder
	for _, f := range fieldsOf(cfg) {
		fmt.Fprintf(&b, "%s=%s\n", f.key, f.String())
	}
	return b.String()
}
