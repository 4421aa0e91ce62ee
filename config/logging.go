package config

import (
	"io"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// NewLogger builds the daemon's logger from logLevel and logFormat, so mqbroker and mqnamesrv
// log the same way: hclog's text lines by default, one JSON object per line with
// logFormat=json (for log shippers that would otherwise have to parse the text format).
func NewLogger(name, level, format string, out io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      hclog.LevelFromString(level),
		Output:     out,
		JSONFormat: strings.EqualFold(format, "json"),
	})
}

// Redacted is the text shown in place of a secret by RedactedProperties.
const Redacted = "******"

// isSecretKey reports whether a property holds a credential (secretKey, httpAuthToken, ...)
// that must never leave the process (GET_BROKER_CONFIG answers anyone the ACL lets through, and
// logs get copied around).
func isSecretKey(key string) bool {
	k := strings.ToLower(key)
	return strings.Contains(k, "secret") || strings.Contains(k, "password") || strings.Contains(k, "token")
}

// RedactedProperties is Properties with every secret's value (secretKey and the like) replaced
// by Redacted when set: what GET_BROKER_CONFIG (26) returns.
func RedactedProperties(cfg any) string {
	var b strings.Builder
	for _, f := range fieldsOf(cfg) {
		v := f.String()
		if v != "" && isSecretKey(f.key) {
			v = Redacted
		}
		b.WriteString(f.key + "=" + v + "\n")
	}
	return b.String()
}
