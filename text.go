package eventstore

import "github.com/eventkit-go/eventstore/internal/safetext"

// maxMessageLen bounds the message of a recorded projection error.
const maxMessageLen = 1024

// sanitizeMessage returns s as valid UTF-8 without NUL bytes, at most
// maxMessageLen bytes long, cut on a rune boundary: a message any backend
// can store.
func sanitizeMessage(s string) string {
	return safetext.Clip(s, maxMessageLen)
}

// clip shortens s for quoting in a message: at most 64 bytes of it, cut on
// a rune boundary and followed by "…" when cut, as valid UTF-8.
func clip(s string) string {
	return safetext.Clip(s, 64+len(safetext.Ellipsis))
}
