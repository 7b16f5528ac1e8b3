package typed

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/eventkit-go/eventstore"
)

// EventOf is a stored event with its data decoded as an E, as a
// projection's handler (On) gets it. The embedded eventstore.Event is the
// event as stored: ID, Type, AggregateID, Data, Metadata, Position,
// RecordedAt and the rest.
type EventOf[E any] struct {
	eventstore.Event
	Value E // the zero E when the event has no data
}

// Handler folds the events of one Go type into a projection's state S;
// On makes one. It is a plain value, so that handlers of different event
// types sit in one list for NewProjection.
type Handler[S any] struct {
	goType reflect.Type
	// bind returns the fold of the events decoded by codec.
	bind func(codec Codec) func(s *S, e *eventstore.Event) error
}

// On returns the handler of the events whose Go type is E (the event type
// registered for E in the Registry given to NewProjection): fn folds each
// into the state, decoded. fn must be deterministic, a function of the
// state and the event only, and do no I/O: the Projector folds events
// again when it rebuilds the projection, and to undo an event that
// failed. An error from fn is recorded for the event, which then changes
// nothing of the instance, even if fn changed the state before it
// returned; eventstore.DropInstance deletes the instance.
func On[S, E any](fn func(state *S, e EventOf[E]) error) Handler[S] {
	return Handler[S]{
		goType: reflect.TypeFor[E](),
		bind: func(codec Codec) func(*S, *eventstore.Event) error {
			decode := decoder[E](codec)
			return func(s *S, e *eventstore.Event) error {
				var v E
				if e.Data != nil {
					if err := decode(e.Data, &v); err != nil {
						return &CodecError{Op: "decode", EventType: e.Type, GoType: reflect.TypeFor[E]().String(), EventID: e.ID, Err: err}
					}
				}
				return fn(s, EventOf[E]{Event: *e, Value: v})
			}
		},
	}
}

// ProjectionOptions configures a Projection; nil means all defaults.
type ProjectionOptions struct {
	// Version is the version of the projection's code, 1 by default.
	// Raise it whenever the handlers compute otherwise or S is encoded
	// otherwise: the projection is then rebuilt from history (see
	// eventstore.Projector.Register for what processes of different
	// versions do).
	Version int64
	// Aggregated makes one instance over the whole feed; else there is
	// one per aggregate id, or per Key.
	Aggregated bool
	// Key, for a single projection, returns the id of the instance an
	// event changes; nil keys instances by aggregate id. It sees the
	// stored event (decode its Data if need be).
	Key func(e *eventstore.Event) (string, error)
	// Description is for people, as a definition's.
	Description string
	// Codec encodes and decodes the state S; nil means JSONCodec. The
	// state must encode to a JSON object: that is what the HTTP API
	// serves as the instance's data.
	Codec Codec
}

// Projection is a projection written in Go: handlers over a typed state
// S, run by an eventstore.Projector (Register) with the guarantees of a
// JSON definition, and queried as values of S. Make one with
// NewProjection; it is safe for concurrent use and may be registered in
// several Projectors.
type Projection[S any] struct {
	code        eventstore.CodeProjection
	codec       Codec
	decodeState func(data []byte, s *S) error                // codec.Unmarshal, or faster for JSONCodec
	handlers    map[string]func(*S, *eventstore.Event) error // by event type
}

// NewProjection returns the projection name of feed (an aggregate type)
// whose instances are states S folded by handlers, one per event Go type
// (On). Each handler's Go type must be registered in reg, which gives its
// event type and codec. A missing registration, two handlers of one Go
// type, or no handler is an error wrapping eventstore.ErrInvalid; so is
// an invalid name or option, reported by Register.
func NewProjection[S any](reg *Registry, name, feed string, opts *ProjectionOptions, handlers ...Handler[S]) (*Projection[S], error) {
	if opts == nil {
		opts = &ProjectionOptions{}
	}
	if reg == nil {
		return nil, fmt.Errorf("typed: projection %q: nil Registry: %w", name, eventstore.ErrInvalid)
	}
	if len(handlers) == 0 {
		return nil, fmt.Errorf("typed: projection %q: at least one handler (typed.On) is required: %w", name, eventstore.ErrInvalid)
	}
	p := &Projection[S]{codec: opts.Codec, handlers: make(map[string]func(*S, *eventstore.Event) error, len(handlers))}
	if p.codec == nil {
		p.codec = JSONCodec{}
	}
	p.decodeState = decoder[S](p.codec)
	version := opts.Version
	if version == 0 {
		version = 1
	}
	p.code = eventstore.CodeProjection{
		Name: name, Description: opts.Description, Feed: feed, Version: version,
		Aggregated: opts.Aggregated, Key: opts.Key, Decode: p.decode,
	}
	for i, h := range handlers {
		if h.bind == nil {
			return nil, fmt.Errorf("typed: projection %q: handlers[%d] is not made by typed.On: %w", name, i, eventstore.ErrInvalid)
		}
		et := reg.byType(h.goType)
		if et == nil {
			return nil, fmt.Errorf("typed: projection %q: handlers[%d]: %w", name, i, &CodecError{Op: "encode", GoType: h.goType.String(), Err: ErrUnregistered})
		}
		if _, dup := p.handlers[et.name]; dup {
			return nil, fmt.Errorf("typed: projection %q: two handlers of %s (event type %q): %w", name, h.goType, et.name, eventstore.ErrInvalid)
		}
		p.handlers[et.name] = h.bind(et.codec)
		p.code.EventTypes = append(p.code.EventTypes, et.name)
	}
	return p, nil
}

// Name returns the projection's name.
func (p *Projection[S]) Name() string { return p.code.Name }

// CodeProjection returns the projection as the root package's hook, for
// eventstore.Projector.Register; Register is the shorthand.
func (p *Projection[S]) CodeProjection() eventstore.CodeProjection { return p.code }

// Register registers the projection in the Projector, which applies it
// from then on (eventstore.Projector.Register): call it at start, in every
// process that should apply it.
func (p *Projection[S]) Register(ctx context.Context, pr *eventstore.Projector) error {
	return pr.Register(ctx, p.code)
}

// state is an instance's state S while the Projector applies a page.
type state[S any] struct {
	p *Projection[S]
	s S
}

func (p *Projection[S]) decode(data []byte) (eventstore.CodeState, error) {
	st := &state[S]{p: p}
	if data != nil {
		if err := p.decodeState(data, &st.s); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// Apply folds e with the handler of its type.
func (st *state[S]) Apply(e *eventstore.Event) error {
	fold := st.p.handlers[e.Type]
	if fold == nil {
		return nil // not handled: the Projector passes only handled types
	}
	return fold(&st.s, e)
}

// MarshalJSON encodes the state with the projection's codec.
func (st *state[S]) MarshalJSON() ([]byte, error) { return st.p.codec.Marshal(&st.s) }

// Instance is one instance of a Projection: its id and state, with when
// it was created and last changed (RecordedAt of the first and last event
// applied) and the Position of that last event.
type Instance[S any] struct {
	ID                   string // the aggregate id or Key; an aggregated projection's name
	State                S
	CreatedAt, UpdatedAt time.Time
	Position             int64
}

// Page is one page of Projection.List.
type Page[S any] struct {
	Instances []Instance[S]
	Total     int64 // every matching instance
	HasMore   bool  // instances follow this page
}

// instance decodes a projection instance.
func (p *Projection[S]) instance(pj eventstore.Projection) (Instance[S], error) {
	in := Instance[S]{ID: pj.ID, CreatedAt: pj.CreatedAt, UpdatedAt: pj.UpdatedAt, Position: pj.Position}
	if err := p.codec.Unmarshal(pj.Data, &in.State); err != nil {
		return in, &CodecError{Op: "decode", GoType: reflect.TypeFor[S]().String(), Err: fmt.Errorf("projection %q instance %q: %w", p.code.Name, pj.ID, err)}
	}
	return in, nil
}

// Get returns the state of the instance id of the single projection, up
// to date with this process's saves (eventstore.Projector.Single): an
// error wrapping eventstore.ErrNotFound when no event made it yet.
func (p *Projection[S]) Get(ctx context.Context, pr *eventstore.Projector, id string) (S, error) {
	pj, err := pr.Single(ctx, p.code.Name, id)
	return p.state(pj, err)
}

// Await is Get that waits, until ctx is done, for the instance to exist
// (eventstore.Projector.AwaitSingle).
func (p *Projection[S]) Await(ctx context.Context, pr *eventstore.Projector, id string) (S, error) {
	pj, err := pr.AwaitSingle(ctx, p.code.Name, id)
	return p.state(pj, err)
}

// Aggregated returns the state of the aggregated projection, up to date
// with this process's saves: an error wrapping eventstore.ErrNotFound
// before its first event.
func (p *Projection[S]) Aggregated(ctx context.Context, pr *eventstore.Projector) (S, error) {
	pj, err := pr.Aggregated(ctx, p.code.Name)
	return p.state(pj, err)
}

func (p *Projection[S]) state(pj eventstore.Projection, err error) (S, error) {
	if err != nil {
		var zero S
		return zero, err
	}
	in, err := p.instance(pj)
	return in.State, err
}

// List returns instances of the single projection as opts selects and
// orders them (eventstore.Projector.List; Search needs indexed fields,
// which a projection in Go has none of).
func (p *Projection[S]) List(ctx context.Context, pr *eventstore.Projector, opts eventstore.ListOptions) (Page[S], error) {
	list, err := pr.List(ctx, p.code.Name, opts)
	if err != nil {
		return Page[S]{}, err
	}
	page := Page[S]{Instances: make([]Instance[S], len(list.Projections)), Total: list.Total, HasMore: list.HasMore}
	for i, pj := range list.Projections {
		if page.Instances[i], err = p.instance(pj); err != nil {
			return Page[S]{}, err
		}
	}
	return page, nil
}

// Count returns how many instances the single projection has.
func (p *Projection[S]) Count(ctx context.Context, pr *eventstore.Projector) (int64, error) {
	return pr.Count(ctx, p.code.Name, eventstore.Reference{})
}
