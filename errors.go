package eventstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/eventkit-go/eventstore/storage"
)

// Sentinel errors. Every error returned by this package and by conforming
// storage backends wraps at most one of these; check them with errors.Is.
// They are the values of package storage, so a backend's errors match them.
var (
	// ErrNotFound reports that an aggregate, a projection definition or a
	// projection instance does not exist.
	ErrNotFound = storage.ErrNotFound

	// ErrConflict reports that a write was refused because it contradicts
	// the stored state: an expected version that does not match, a batch
	// that mixes already stored and new event ids, a projection definition
	// whose name is taken. Nothing was written.
	ErrConflict = storage.ErrConflict

	// ErrInvalid reports input that is well-formed but not acceptable: an
	// event id that is not a UUID, an empty event type, data that is not a
	// JSON object, a selector that is not of the documented form, and so
	// on. The error is usually a *ValidationError that says which field.
	ErrInvalid = storage.ErrInvalid

	// ErrClosed reports a call on a Store or Projector after Close.
	ErrClosed = storage.ErrClosed

	// ErrUnavailable reports that the storage could not be reached or
	// failed transiently (a dropped connection, a database restart, no
	// answer in time). The operation may be retried; for a save the
	// outcome is unknown, and a retry with the same event ids is safe.
	ErrUnavailable = storage.ErrUnavailable

	// ErrFull reports that the storage is out of space (a full disk, a
	// size limit or a quota): nothing was written. A retry succeeds only
	// once an operator has freed space; Store.OutOfSpace reports it.
	ErrFull = storage.ErrFull
)

// wrapNotFound adds what to err; when err is a not-found error, whose text
// would only repeat what, it returns what wrapping ErrNotFound alone.
func wrapNotFound(what string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// FieldError names one invalid field of an input.
type FieldError struct {
	// Field is a JSON-path-like name of the field, such as
	// "events[2].eventId" or "handlers[0].functions[1].targetSelector".
	Field string `json:"field"`
	// Message says what is wrong with it.
	Message string `json:"message"`
}

// ValidationError is returned for input that fails validation. It wraps
// ErrInvalid, so both errors.Is(err, ErrInvalid) and errors.As(err, &ve)
// work. Fields holds one entry per invalid field, in input order.
type ValidationError struct {
	// Op is the operation that rejected the input, e.g. "save" or
	// "create projection".
	Op string
	// Fields lists the invalid fields, at most MaxFieldErrors of them; it
	// is never empty.
	Fields []FieldError
	// Omitted counts the further problems found, beyond the first
	// MaxFieldErrors, that Fields does not list.
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
// MaxFieldErrors it only counts them, without formatting their messages.
type validation struct {
	op      string
	fields  []FieldError
	omitted int
}

func (v *validation) add(field, format string, args ...any) {
	if len(v.fields) >= MaxFieldErrors {
		v.omitted++
		return
	}
	v.fields = append(v.fields, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (v *validation) err() error {
	if len(v.fields) == 0 {
		return nil
	}
	return &ValidationError{Op: v.op, Fields: v.fields, Omitted: v.omitted}
}

// full reports whether the collector holds as many problems as it lists.
func (v *validation) full() bool { return len(v.fields) >= MaxFieldErrors }
