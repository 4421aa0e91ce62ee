package acl

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ErrPlaceholder marks credentials copied unchanged from the shipped example file, or one of
// RocketMQ's well-known sample pairs: the server refuses to start with them.
var ErrPlaceholder = errors.New("placeholder or sample credentials")

// minKeyLen is RocketMQ's minimum length of an access key and of a secret key.
const minKeyLen = 6

// Account is one entry of accounts: its key pair and permissions.
type Account struct {
	AccessKey string
	SecretKey string
	// White: requests from these addresses under this access key skip the signature check.
	White            []AddrPattern
	Admin            bool
	DefaultTopicPerm Perm
	DefaultGroupPerm Perm
	TopicPerms       map[string]Perm
	GroupPerms       map[string]Perm // keyed by group name, without %RETRY%
}

// Config is a parsed plain_acl.yml.
type Config struct {
	GlobalWhite []AddrPattern
	Accounts    map[string]*Account // by access key
}

// fileAccount and fileConfig are the YAML shapes. whiteRemoteAddress is one string in
// RocketMQ's file; a list is accepted too.
type fileAccount struct {
	AccessKey          string    `yaml:"accessKey"`
	SecretKey          string    `yaml:"secretKey"`
	WhiteRemoteAddress yaml.Node `yaml:"whiteRemoteAddress"`
	Admin              bool      `yaml:"admin"`
	DefaultTopicPerm   string    `yaml:"defaultTopicPerm"`
	DefaultGroupPerm   string    `yaml:"defaultGroupPerm"`
	TopicPerms         []string  `yaml:"topicPerms"`
	GroupPerms         []string  `yaml:"groupPerms"`
}

type fileConfig struct {
	GlobalWhiteRemoteAddresses []string      `yaml:"globalWhiteRemoteAddresses"`
	Accounts                   []fileAccount `yaml:"accounts"`
	// Keys of RocketMQ's file this server does not use, accepted so a real file loads.
	DataVersion yaml.Node `yaml:"dataVersion"`
}

// LoadFile reads and parses a plain_acl.yml file.
func LoadFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read ACL file: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("ACL file %s: %w", path, err)
	}
	return c, nil
}

// Parse parses plain_acl.yml content. Every problem is an error naming the entry: unknown
// keys, missing or short keys, duplicate access keys, bad permissions or address patterns, and
// placeholder credentials (ErrPlaceholder).
func Parse(data []byte) (*Config, error) {
	var fc fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil {
		return nil, fmt.Errorf("parse YAML: %w", err)
	}
	c := &Config{Accounts: map[string]*Account{}}
	for _, s := range fc.GlobalWhiteRemoteAddresses {
		p, err := ParseAddrPattern(s)
		if err != nil {
			return nil, fmt.Errorf("globalWhiteRemoteAddresses: %w", err)
		}
		c.GlobalWhite = append(c.GlobalWhite, p)
	}
	for i, fa := range fc.Accounts {
		a, err := fa.account()
		if err != nil {
			return nil, fmt.Errorf("accounts[%d] (accessKey %q): %w", i, fa.AccessKey, err)
		}
		if _, dup := c.Accounts[a.AccessKey]; dup {
			return nil, fmt.Errorf("accounts[%d]: accessKey %q is listed twice", i, a.AccessKey)
		}
		c.Accounts[a.AccessKey] = a
	}
	return c, nil
}

func (fa *fileAccount) account() (*Account, error) {
	a := &Account{
		AccessKey:  strings.TrimSpace(fa.AccessKey),
		SecretKey:  strings.TrimSpace(fa.SecretKey),
		Admin:      fa.Admin,
		TopicPerms: map[string]Perm{},
		GroupPerms: map[string]Perm{},
	}
	if err := CheckCredentials(a.AccessKey, a.SecretKey); err != nil {
		return nil, err
	}
	var err error
	if a.White, err = whiteList(&fa.WhiteRemoteAddress); err != nil {
		return nil, fmt.Errorf("whiteRemoteAddress: %w", err)
	}
	if a.DefaultTopicPerm, err = permOrDeny(fa.DefaultTopicPerm); err != nil {
		return nil, fmt.Errorf("defaultTopicPerm: %w", err)
	}
	if a.DefaultGroupPerm, err = permOrDeny(fa.DefaultGroupPerm); err != nil {
		return nil, fmt.Errorf("defaultGroupPerm: %w", err)
	}
	if err := parsePermList(fa.TopicPerms, a.TopicPerms, false); err != nil {
		return nil, fmt.Errorf("topicPerms: %w", err)
	}
	if err := parsePermList(fa.GroupPerms, a.GroupPerms, true); err != nil {
		return nil, fmt.Errorf("groupPerms: %w", err)
	}
	return a, nil
}

// CheckCredentials validates a key pair: both at least 6 characters and neither a placeholder
// of the example file nor one of RocketMQ's published sample pairs.
func CheckCredentials(accessKey, secretKey string) error {
	if len(accessKey) < minKeyLen {
		return fmt.Errorf("accessKey must be at least %d characters", minKeyLen)
	}
	if len(secretKey) < minKeyLen {
		return fmt.Errorf("secretKey must be at least %d characters", minKeyLen)
	}
	for _, k := range []string{accessKey, secretKey} {
		if strings.Contains(strings.ToUpper(k), "CHANGE_ME") {
			return fmt.Errorf("%w: %q is the example file's placeholder; generate real keys", ErrPlaceholder, k)
		}
	}
	switch {
	case secretKey == "12345678" || secretKey == "1234567" || secretKey == "123456",
		accessKey == "RocketMQ" && secretKey == "12345678",
		accessKey == "rocketmq2" && secretKey == "12345678":
		return fmt.Errorf("%w: the secretKey is one of RocketMQ's published samples; generate real keys", ErrPlaceholder)
	}
	return nil
}

func whiteList(n *yaml.Node) ([]AddrPattern, error) {
	var items []string
	switch n.Kind {
	case 0:
	case yaml.ScalarNode:
		if n.Tag != "!!null" && strings.TrimSpace(n.Value) != "" {
			items = append(items, n.Value)
		}
	case yaml.SequenceNode:
		if err := n.Decode(&items); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("want an address pattern or a list of them")
	}
	var out []AddrPattern
	for _, s := range items {
		p, err := ParseAddrPattern(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func permOrDeny(s string) (Perm, error) {
	if strings.TrimSpace(s) == "" {
		return Deny, nil
	}
	return ParsePerm(s)
}

// parsePermList reads "name=PERM" entries; group names lose a %RETRY% prefix.
func parsePermList(list []string, into map[string]Perm, group bool) error {
	for _, e := range list {
		name, word, ok := strings.Cut(e, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return fmt.Errorf("entry %q: want name=PERM", e)
		}
		p, err := ParsePerm(word)
		if err != nil {
			return fmt.Errorf("entry %q: %w", e, err)
		}
		if group {
			name = strings.TrimPrefix(name, RetryPrefix)
		}
		into[name] = p
	}
	return nil
}
