package typed

import (
	"errors"
	"strconv"
	"strings"

	"github.com/eventkit-go/eventstore"
)

// Sentinel causes of a *CodecError; test with errors.Is.
var (
	// ErrUnregistered: the event type (decoding) or the Go type (encoding)
	// is not registered in the Registry.
	ErrUnregistered = errors.New("typed: not registered")
	// ErrWrongType: the event is registered for another Go type than the
	// one asked for (DecodeAs), or a value is not of the type expected.
	ErrWrongType = errors.New("typed: wrong Go type")
)

// CodecError is the error of a value or an event that a Registry cannot
// encode or decode. It names what it knows of the event type and the Go
// type, and wraps both Err and eventstore.ErrInvalid, so that
// errors.Is(err, ErrUnregistered) and errors.Is(err,
// eventstore.ErrInvalid) both hold.
type CodecError struct {
	Op        string // "encode" or "decode"
	EventType string // the event type name, when known
	GoType    string // the Go type, such as "orders.Placed", when known
	EventID   string // the stored event's id, when decoding
	// Err is the cause: ErrUnregistered, ErrWrongType, or the codec's
	// error (such as a *json.UnmarshalTypeError).
	Err error
}

// Error says what failed, for which event type and Go type, and why.
func (e *CodecError) Error() string {
	var b strings.Builder
	b.WriteString("typed: ")
	b.WriteString(e.Op)
	if e.Op == "encode" {
		if e.GoType != "" {
			b.WriteString(" ")
			b.WriteString(e.GoType)
		}
		if e.EventType != "" {
			b.WriteString(" as ")
			b.WriteString(strconv.Quote(e.EventType))
		}
	} else {
		if e.EventID != "" {
			b.WriteString(" event ")
			b.WriteString(e.EventID)
		}
		if e.EventType != "" {
			b.WriteString(" of type ")
			b.WriteString(strconv.Quote(e.EventType))
		}
		if e.GoType != "" {
			b.WriteString(" into ")
			b.WriteString(e.GoType)
		}
	}
	b.WriteString(": ")
	switch {
	case errors.Is(e.Err, ErrUnregistered) && e.Op == "decode":
		b.WriteString("event type not registered")
	case errors.Is(e.Err, ErrUnregistered):
		b.WriteString("Go type not registered (typed.Register)")
	case e.Err != nil:
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "typed: "))
	}
	return b.String()
}

// Unwrap returns Err and eventstore.ErrInvalid.
func (e *CodecError) Unwrap() []error { return []error{e.Err, eventstore.ErrInvalid} }
