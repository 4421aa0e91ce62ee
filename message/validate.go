package message

import (
	"errors"
	"fmt"
	"strings"
)

// Name limits (§5.5).
const (
	// MaxTopicNameLength is the limit for ordinary topics.
	MaxTopicNameLength = 127
	// MaxSystemTopicNameLength is the limit for %RETRY% and %DLQ% topics, which embed a group.
	MaxSystemTopicNameLength = 255
	// MaxGroupNameLength is the 4.x group limit (5.x clients stop at 120, so this accepts both).
	MaxGroupNameLength = 255
	// RetryTopicPrefix starts the retry topic of a consumer group.
	RetryTopicPrefix = "%RETRY%"
	// DLQTopicPrefix starts the dead-letter topic of a consumer group.
	DLQTopicPrefix = "%DLQ%"
)

// ErrInvalidName is wrapped by ValidateTopic and ValidateGroup errors.
var ErrInvalidName = errors.New("invalid name")

// ValidateTopic checks a topic name against RocketMQ's rules: characters % | a-z A-Z 0-9 _ -,
// at most 127 bytes, or 255 for %RETRY% and %DLQ% topics.
func ValidateTopic(name string) error {
	limit := MaxTopicNameLength
	if strings.HasPrefix(name, RetryTopicPrefix) || strings.HasPrefix(name, DLQTopicPrefix) {
		limit = MaxSystemTopicNameLength
	}
	return validateName("topic", name, limit)
}

// ValidateGroup checks a consumer or producer group name: same characters as topics, at most
// 255 bytes.
func ValidateGroup(name string) error { return validateName("group", name, MaxGroupNameLength) }

func validateName(kind, name string, limit int) error {
	if name == "" {
		return fmt.Errorf("%s name is empty: %w", kind, ErrInvalidName)
	}
	if len(name) > limit {
		return fmt.Errorf("%s name %.40q... is %d characters, limit %d: %w", kind, name, len(name), limit, ErrInvalidName)
	}
	for i := 0; i < len(name); i++ {
		if !validNameChar(name[i]) {
			return fmt.Errorf("%s name %q has illegal character %q at %d (allowed: %% | a-z A-Z 0-9 _ -): %w", kind, name, name[i], i, ErrInvalidName)
		}
	}
	return nil
}

func validNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '%' || c == '|' || c == '_' || c == '-'
}
