package eventstore

import (
	"fmt"
	"unicode/utf8"
)

// encryptedProblem validates NewEvent.EncryptedData: at most
// MaxEncryptedData bytes of UTF-8.
func encryptedProblem(s string) string {
	switch {
	case len(s) > MaxEncryptedData:
		return fmt.Sprintf("must be at most %d bytes long, got %d", MaxEncryptedData, len(s))
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	}
	return ""
}
