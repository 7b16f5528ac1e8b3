// Package names holds the rule for the names of the event store:
// aggregate types and ids, event types, projection, reaction and feed
// names. Package eventstore applies it to its input; httpapi, typed and
// reactions check their own input with it.
package names

import (
	"fmt"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore/storage"
)

// MaxLen bounds aggregate types, ids, event types and projection names.
const MaxLen = 256

// AllFeed is the name of the feed of every aggregate type over HTTP
// (GET /feeds/_all). It is reserved: saves refuse it as an aggregate type,
// and projection and reaction definitions as a feed name (CheckFeed).
const AllFeed = "_all"

// Check reports whether s may be an aggregate type or id, a projection
// or a feed name: non-empty UTF-8 of at most 256 bytes, not "." or "..",
// without '/' or control characters. Its error wraps storage.ErrInvalid
// and states the problem alone ("must not contain '/'"), to prefix with
// the field.
func Check(s string) error {
	if msg := Problem(s); msg != "" {
		return &nameError{msg}
	}
	return nil
}

// CheckFeed reports whether s may be an aggregate type or the feed name of
// a projection or reaction: Check's rule, and not AllFeed. Its error wraps
// storage.ErrInvalid and states the problem alone, as Check's.
func CheckFeed(s string) error {
	if msg := FeedProblem(s); msg != "" {
		return &nameError{msg}
	}
	return nil
}

// FeedProblem is the rule of CheckFeed: it returns what is wrong with s,
// or "".
func FeedProblem(s string) string {
	if s == AllFeed {
		return fmt.Sprintf("must not be %q: %s is the feed of all aggregate types (GET /feeds/%s), not the name of one", s, s, s)
	}
	return Problem(s)
}

// nameError is the error of Check.
type nameError struct{ msg string }

func (e *nameError) Error() string { return e.msg }
func (e *nameError) Unwrap() error { return storage.ErrInvalid }

// TypeProblem validates an event type: a name that may contain '/'.
func TypeProblem(s string) string {
	return problem(s, false)
}

// Problem is the rule of Check: it returns what is wrong with s, or "".
func Problem(s string) string {
	if s == "." || s == ".." {
		return fmt.Sprintf("must not be %q", s)
	}
	return problem(s, true)
}

// nameClass classifies bytes for problem: nameOK for printable ASCII,
// nameSlash for '/', nameOther for control characters, DEL and every byte
// of a multi-byte UTF-8 sequence (or of invalid UTF-8).
var nameClass = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c == '/':
			t[c] = nameSlash
		case c < 0x20 || c >= 0x7f:
			t[c] = nameOther
		}
	}
	return t
}()

const (
	nameOK    = 0
	nameSlash = 1
	nameOther = 2
)

// problem returns what is wrong with s as a name ("" for nothing); path
// names may not contain '/'. Names of printable ASCII, by far the most
// common, take one pass over their bytes.
func problem(s string, path bool) string {
	switch {
	case s == "":
		return "is required"
	case len(s) > MaxLen:
		return fmt.Sprintf("must be at most %d bytes long", MaxLen)
	}
	var acc uint8
	for i := 0; i < len(s); i++ {
		acc |= nameClass[s[i]]
	}
	if acc == nameOK || (acc == nameSlash && !path) {
		return ""
	}
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	for _, r := range s {
		if (path && r == '/') || r < 0x20 || r == 0x7f {
			return fmt.Sprintf("must not contain %q", r)
		}
	}
	return ""
}
