package eventstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage"
)

// Sentinel errors, package storage's values, so a backend's errors match
// too. After ErrUnavailable a save's outcome is unknown; retrying it with
// the same event ids is safe.
var (
	ErrNotFound    = storage.ErrNotFound    // no such aggregate, projection or instance
	ErrConflict    = storage.ErrConflict    // the write contradicts the stored state (nothing was written), or a feed cursor is past the head (see CursorAheadError)
	ErrInvalid     = storage.ErrInvalid     // unacceptable input; see ValidationError
	ErrClosed      = storage.ErrClosed      // a call after Close
	ErrUnavailable = storage.ErrUnavailable // the storage failed transiently or did not answer in time
	ErrFull        = storage.ErrFull        // the storage is out of space (see Store.OutOfSpace)
)

// wrapNotFound adds what to err; when err is a not-found error, whose text
// would only repeat what, it returns what wrapping ErrNotFound alone.
func wrapNotFound(what string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// FieldError names one invalid field of an input, such as
// "events[2].eventId", and says what is wrong with it.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError is the error of invalid input; it wraps ErrInvalid.
// Fields lists at most 100 invalid fields, in input order; Omitted counts
// the others.
type ValidationError struct {
	Op      string // the operation, such as "save" or "create projection"
	Fields  []FieldError
	Omitted int
}

// Error implements the error interface.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("eventstore: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	b.WriteString("invalid input: ")
	for i, f := range e.Fields {
		if i > 0 {
			b.WriteString("; ")
		}
		if f.Field != "" {
			b.WriteString(f.Field)
			b.WriteString(": ")
		}
		b.WriteString(f.Message)
	}
	if e.Omitted > 0 {
		fmt.Fprintf(&b, "; and %d more", e.Omitted)
	}
	return b.String()
}

// Unwrap returns ErrInvalid.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// validation collects field errors for one operation. Beyond
// limits.MaxFieldErrors it only counts them, without formatting their messages.
type validation struct {
	op      string
	fields  []FieldError
	omitted int
}

func (v *validation) add(field, format string, args ...any) {
	if len(v.fields) >= limits.MaxFieldErrors {
		v.omitted++
		return
	}
	v.fields = append(v.fields, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Add is add, for the compilers of package lang (lang.Problems).
func (v *validation) Add(field, format string, args ...any) { v.add(field, format, args...) }

func (v *validation) err() error {
	if len(v.fields) == 0 {
		return nil
	}
	return &ValidationError{Op: v.op, Fields: v.fields, Omitted: v.omitted}
}

// full reports whether the collector holds as many problems as it lists.
func (v *validation) full() bool { return len(v.fields) >= limits.MaxFieldErrors }
