package message

import (
	"errors"
	"strings"
	"testing"
)

// The findings of the adversarial security review: each must be refused by the validator of its
// kind, and a consumer group whose retry topic would be invalid is refused too.
func TestValidatorsRefuseFindings(t *testing.T) {
	bad := []string{"../../tmp/x", "a\x00b", strings.Repeat("g", 10<<10), "%RETRY%../../..", "", "a b", "a/b", "a.b"}
	for _, n := range bad {
		if err := ValidateTopic(n); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateTopic(%.20q) = %v, want ErrInvalidName", n, err)
		}
		if err := ValidateGroup(n); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateGroup(%.20q) = %v, want ErrInvalidName", n, err)
		}
		if err := ValidateConsumerGroup(n); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateConsumerGroup(%.20q) = %v, want ErrInvalidName", n, err)
		}
	}
	if err := ValidateConsumerGroup("GID_ok-1|x%y"); err != nil {
		t.Errorf("valid consumer group refused: %v", err)
	}
	long := strings.Repeat("g", MaxGroupNameLength)
	if err := ValidateGroup(long); err != nil {
		t.Errorf("a %d-byte group is valid: %v", len(long), err)
	}
	if err := ValidateConsumerGroup(long); !errors.Is(err, ErrInvalidName) {
		t.Errorf("a %d-byte consumer group gives a %d-byte retry topic, want refused: %v", len(long), len(RetryTopic(long)), err)
	}
	if got := DLQTopic("G"); got != "%DLQ%G" {
		t.Errorf("DLQTopic = %q", got)
	}
}
