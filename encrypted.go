package eventstore

import (
	"fmt"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore/internal/limits"
)

// encryptedProblem validates NewEvent.EncryptedData: at most
// limits.MaxEncryptedData bytes of UTF-8.
func encryptedProblem(s string) string {
	switch {
	case len(s) > limits.MaxEncryptedData:
		return fmt.Sprintf("must be at most %d bytes long, got %d", limits.MaxEncryptedData, len(s))
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	}
	return ""
}
