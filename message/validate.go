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

// RetryTopic is the retry topic of a consumer group (%RETRY%<group>).
func RetryTopic(group string) string { return RetryTopicPrefix + group }

// DLQTopic is the dead-letter topic of a consumer group (%DLQ%<group>).
func DLQTopic(group string) string { return DLQTopicPrefix + group }

// ValidateConsumerGroup is ValidateGroup for a group whose %RETRY% and %DLQ% topics the broker
// may create: the group must be valid and so must the topic names derived from it, so a group
// that passes can never put an unusable name into the topic table.
func ValidateConsumerGroup(name string) error {
	if err := ValidateGroup(name); err != nil {
		return err
	}
	if err := ValidateTopic(RetryTopic(name)); err != nil {
		return fmt.Errorf("group %q gives an invalid retry topic: %w", name, err)
	}
	return nil
}
