package typed

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/names"
)

// Registry maps event type names to Go types and their codecs. Register
// every type before the Registry is used; registering while other
// goroutines encode and decode is safe too. The zero Registry is empty and
// encodes with JSONCodec; a Registry must not be copied after first use.
//
// There is no package-level Registry: pass yours to NewStore (and to
// whatever else decodes events), so that two stores in one process, or
// the tests of two packages, never share one by accident.
type Registry struct {
	codec Codec
	mu    sync.Mutex                 // serialises Register
	types atomic.Pointer[registered] // replaced whole by Register, read without locks
}

// RegistryOptions configures a Registry; nil means all defaults.
type RegistryOptions struct {
	Codec Codec // the codec of types registered without one; nil means JSONCodec
}

// NewRegistry returns an empty Registry.
func NewRegistry(opts *RegistryOptions) *Registry {
	r := &Registry{}
	if opts != nil {
		r.codec = opts.Codec
	}
	return r
}

// registered is the content of a Registry at one moment.
type registered struct {
	byName map[string]*registeredType
	byType map[reflect.Type]*registeredType
}

// registeredType is one registered event type.
type registeredType struct {
	name   string
	goType reflect.Type
	codec  Codec
	decode func(data []byte) (any, error) // a T, or the codec's error
}

// Register registers the Go type T as the event type eventType, with the
// Registry's codec. Values of type T (or *T) then encode to events of that
// type, and those events decode to values of type T.
//
// It fails with an error wrapping eventstore.ErrInvalid when eventType is
// not a valid name (names.Check) or is registered already, when T
// is registered already (under any name: encoding would be ambiguous), or
// when T is an interface type or NewEvent.
func Register[T any](r *Registry, eventType string) error {
	return RegisterCodec[T](r, eventType, nil)
}

// RegisterCodec is Register with a codec for this type alone (nil means
// the Registry's).
func RegisterCodec[T any](r *Registry, eventType string, codec Codec) error {
	t := reflect.TypeFor[T]()
	if r == nil {
		return fmt.Errorf("typed: register %s: nil Registry: %w", t, eventstore.ErrInvalid)
	}
	if err := names.Check(eventType); err != nil {
		return fmt.Errorf("typed: register %s: event type %q: %w", t, eventType, err)
	}
	switch {
	case t.Kind() == reflect.Interface:
		return fmt.Errorf("typed: register %q: %s is an interface type; register concrete types: %w", eventType, t, eventstore.ErrInvalid)
	case t == reflect.TypeFor[NewEvent]() || t == reflect.TypeFor[*NewEvent]():
		return fmt.Errorf("typed: register %q: typed.NewEvent wraps event values, it is not one: %w", eventType, eventstore.ErrInvalid)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.types.Load()
	next := &registered{byName: map[string]*registeredType{}, byType: map[reflect.Type]*registeredType{}}
	if old != nil {
		if prev, ok := old.byName[eventType]; ok {
			return fmt.Errorf("typed: register %s: event type %q is registered already, for %s: %w", t, eventType, prev.goType, eventstore.ErrInvalid)
		}
		if prev, ok := old.byType[t]; ok {
			return fmt.Errorf("typed: register %q: %s is registered already, as %q: %w", eventType, t, prev.name, eventstore.ErrInvalid)
		}
		maps.Copy(next.byName, old.byName)
		maps.Copy(next.byType, old.byType)
	}
	if codec == nil {
		codec = r.codec
	}
	if codec == nil {
		codec = JSONCodec{}
	}
	et := &registeredType{name: eventType, goType: t, codec: codec}
	et.decode = func(data []byte) (any, error) {
		var v T
		if data == nil {
			return v, nil
		}
		err := codec.Unmarshal(data, &v)
		return v, err
	}
	next.byName[eventType] = et
	next.byType[t] = et
	r.types.Store(next)
	return nil
}

// EventTypes returns the registered event type names, sorted.
func (r *Registry) EventTypes() []string {
	reg := r.load()
	if reg == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(reg.byName))
}

// EventType returns the event type name registered for T, or a
// *CodecError wrapping ErrUnregistered.
func EventType[T any](r *Registry) (string, error) {
	t := reflect.TypeFor[T]()
	if reg := r.load(); reg != nil {
		if et, ok := reg.byType[t]; ok {
			return et.name, nil
		}
	}
	return "", &CodecError{Op: "encode", GoType: t.String(), Err: ErrUnregistered}
}

func (r *Registry) load() *registered {
	if r == nil {
		return nil
	}
	return r.types.Load()
}

// Encode returns v as an event to save: Type is the event type registered
// for v's Go type, Data what its codec made of v. v is a value of a
// registered type T, a *T, or a NewEvent (or *NewEvent) holding one, whose
// ID and Metadata then carry over; the ID is a new eventstore.NewEventID
// when none is given.
//
// It fails with a *CodecError: ErrUnregistered for a Go type not
// registered, ErrWrongType for nil, or the codec's error; data that is not
// a JSON object is refused too, naming the type.
func (r *Registry) Encode(v any) (eventstore.NewEvent, error) {
	var ne eventstore.NewEvent
	switch w := v.(type) {
	case NewEvent:
		ne.ID, ne.Metadata, v = w.ID, w.Metadata, w.Value
	case *NewEvent:
		if w == nil {
			return ne, &CodecError{Op: "encode", GoType: "*typed.NewEvent", Err: fmt.Errorf("%w: nil", ErrWrongType)}
		}
		ne.ID, ne.Metadata, v = w.ID, w.Metadata, w.Value
	}
	if v == nil {
		return ne, &CodecError{Op: "encode", GoType: "nil", Err: fmt.Errorf("%w: an event value is needed, got nil", ErrWrongType)}
	}
	t := reflect.TypeOf(v)
	et := r.byType(t)
	if et == nil && t.Kind() == reflect.Pointer {
		if et = r.byType(t.Elem()); et != nil && reflect.ValueOf(v).IsNil() {
			return ne, &CodecError{Op: "encode", EventType: et.name, GoType: t.String(), Err: fmt.Errorf("%w: nil pointer", ErrWrongType)}
		}
	}
	if et == nil {
		return ne, &CodecError{Op: "encode", GoType: t.String(), Err: ErrUnregistered}
	}
	data, err := et.codec.Marshal(v)
	if err != nil {
		return ne, &CodecError{Op: "encode", EventType: et.name, GoType: t.String(), Err: err}
	}
	switch trimmed := bytes.TrimSpace(data); {
	case len(trimmed) > 0 && trimmed[0] == '{':
		ne.Data = trimmed
	case string(trimmed) == "null":
		ne.Data = nil
	default:
		return ne, &CodecError{Op: "encode", EventType: et.name, GoType: t.String(),
			Err: fmt.Errorf("the codec's data is not a JSON object (the store keeps only objects as event data; see Codec): %.40q", data)}
	}
	ne.Type = et.name
	if ne.ID == "" {
		ne.ID = eventstore.NewEventID()
	}
	return ne, nil
}

func (r *Registry) byType(t reflect.Type) *registeredType {
	if reg := r.load(); reg != nil {
		return reg.byType[t]
	}
	return nil
}

// Decode returns e with its data decoded into a value of the Go type
// registered for e.Type (a T, not a *T; the zero T when e has no data).
// It fails with a *CodecError: ErrUnregistered for an event type not
// registered, or the codec's error; the returned Event holds e either way.
func (r *Registry) Decode(e eventstore.Event) (Event, error) {
	var et *registeredType
	if reg := r.load(); reg != nil {
		et = reg.byName[e.Type]
	}
	if et == nil {
		return Event{Event: e}, &CodecError{Op: "decode", EventType: e.Type, EventID: e.ID, Err: ErrUnregistered}
	}
	v, err := et.decode(e.Data)
	if err != nil {
		return Event{Event: e}, &CodecError{Op: "decode", EventType: e.Type, GoType: et.goType.String(), EventID: e.ID, Err: err}
	}
	return Event{Event: e, Value: v}, nil
}

// DecodeAs decodes e as Registry.Decode does, and returns its value as a
// T: a *CodecError wrapping ErrWrongType when e.Type is registered for
// another Go type.
func DecodeAs[T any](r *Registry, e eventstore.Event) (T, error) {
	var zero T
	var et *registeredType
	if reg := r.load(); reg != nil {
		et = reg.byName[e.Type]
	}
	want := reflect.TypeFor[T]()
	if et != nil && et.goType != want {
		return zero, &CodecError{Op: "decode", EventType: e.Type, GoType: want.String(), EventID: e.ID,
			Err: fmt.Errorf("%w: the event type is registered for %s", ErrWrongType, et.goType)}
	}
	ev, err := r.Decode(e)
	if err != nil {
		return zero, err
	}
	return ev.Value.(T), nil
}
