package eventstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/internal/names"
	"github.com/eventkit-go/eventstore/storage"
)

// CodeProjection is a projection in Go (typed.NewProjection is the usual
// way to write one), applied with a Definition's guarantees and served
// through the same queries and endpoints as the JSON its states encode to.
// The code is not stored: the storage keeps a Definition naming Version.
type CodeProjection struct {
	Name        string   // shared with the names of Definitions
	Description string   // for people, as a Definition's
	Feed        string   // the aggregate type whose events it reads
	Version     int64    // at least 1; raise it when the code computes or encodes otherwise (a rebuild, see Register)
	Aggregated  bool     // one instance over the feed, else one per aggregate id or Key
	EventTypes  []string // those it handles (at most 1000); others are not decoded
	// Key, for a single projection, returns the id of the instance an
	// event changes (nil: the aggregate id); an error is recorded.
	Key func(e *Event) (string, error)
	// Decode returns an instance's state from its stored JSON object, or
	// a new state for nil; an error is recorded for each event.
	Decode func(data []byte) (CodeState, error)
}

// CodeState is an instance's state while the Projector applies a page of
// events to it: decoded once per page, encoded once at its commit.
type CodeState interface {
	// Apply folds e into the state, deterministically and without I/O, nor
	// keeping or changing e; an error is recorded for the event, which then
	// changes nothing; DropInstance deletes the instance.
	Apply(e *Event) error
	MarshalJSON() ([]byte, error) // a JSON object of at most ProjectorOptions.MaxInstanceBytes
}

// DropInstance, returned by CodeState.Apply, deletes the instance, as
// the function delete does; nothing is recorded.
var DropInstance = errors.New("eventstore: drop the projection instance")

// CodeSpec marks the Definition of a CodeProjection. Put and Create
// refuse a Definition with one, and to replace a CodeProjection.
type CodeSpec struct {
	Version int64 `json:"version"` // CodeProjection.Version
}

// errCodeProjection reports an attempt to change a projection in Go
// through a Definition.
var errCodeProjection = fmt.Errorf("%w: the projection is written in Go (registered with Projector.Register); it cannot be replaced or deleted by a definition", ErrConflict)

// errForeignCode reports a projection in Go that this Projector does not
// apply: its code, at the stored version, is not registered here.
var errForeignCode = errors.New("eventstore: projection in Go not registered in this process at the stored version")

// compileCode validates cp and compiles it.
func compileCode(cp CodeProjection) (*compiled, error) {
	v := validation{op: "register projection"}
	checkName(&v, "name", cp.Name)
	checkName(&v, "feed", cp.Feed)
	if msg := descriptionProblem(cp.Description); msg != "" {
		v.add("description", "%s", msg)
	}
	if cp.Version < 1 {
		v.add("version", "must be at least 1")
	}
	switch {
	case len(cp.EventTypes) == 0:
		v.add("eventTypes", "at least one event type is required")
	case len(cp.EventTypes) > limits.MaxHandlers:
		v.add("eventTypes", "at most %d event types are allowed", limits.MaxHandlers)
		cp.EventTypes = cp.EventTypes[:limits.MaxHandlers]
	}
	for i, t := range cp.EventTypes {
		if msg := names.TypeProblem(t); msg != "" {
			v.add(fmt.Sprintf("eventTypes[%d]", i), "%s", msg)
		} else if j := slices.Index(cp.EventTypes, t); j < i {
			v.add(fmt.Sprintf("eventTypes[%d]", i), "%q is already at eventTypes[%d]", clip(t), j)
		}
	}
	if cp.Decode == nil {
		v.add("decode", "is required")
	}
	if cp.Aggregated && cp.Key != nil {
		v.add("key", "applies to single projections only")
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	cp.EventTypes = slices.Clone(cp.EventTypes)
	d := Definition{Name: cp.Name, Description: cp.Description, Feed: cp.Feed, Aggregated: cp.Aggregated, Code: &CodeSpec{Version: cp.Version}}
	for _, t := range cp.EventTypes {
		d.Handlers = append(d.Handlers, Handler{EventType: t})
	}
	c := codeCompiled(d)
	c.code = &cp
	spec, err := jsonSpec(d)
	if err != nil {
		return nil, err
	}
	c.spec = spec
	return c, nil
}

// codeCompiled returns the compiled form of the stored definition of a
// projection in Go, without its code.
func codeCompiled(d Definition) *compiled {
	c := &compiled{def: d, handlers: make(map[handlerKey]*chandler, len(d.Handlers)), feed: d.Feed}
	if d.Feed != "" {
		c.feeds = []string{d.Feed}
	}
	for _, h := range d.Handlers {
		c.handlers[handlerKey{d.Feed, h.EventType}] = &chandler{}
	}
	return c
}

// decodeStored compiles a stored definition; one of a projection in Go
// takes the code registered for its name and version, if any.
func (p *Projector) decodeStored(rec storage.DefinitionRecord) (*compiled, error) {
	d, err := decodeSpec(rec.Spec)
	if err != nil {
		return nil, fmt.Errorf("projection %q: stored definition is unreadable: %v", rec.Name, err)
	}
	if d.Code == nil {
		c, err := compile(d)
		if err != nil {
			return nil, fmt.Errorf("projection %q: stored definition: %w", rec.Name, err)
		}
		return c, nil
	}
	c := codeCompiled(d)
	if c.spec, err = jsonSpec(d); err != nil {
		return nil, err
	}
	if reg := p.registered(strings.TrimSuffix(rec.Name, replacementSuffix)); reg != nil && reg.def.Code.Version == d.Code.Version {
		c.code = reg.code
		c.handlers = reg.handlers // the registered code decides what it handles
	}
	return c, nil
}

// registered returns the projection in Go registered under name, or nil.
func (p *Projector) registered(name string) *compiled {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code[name]
}

// jsonSpec is the stored spec of d, without reset counts.
func jsonSpec(d Definition) ([]byte, error) {
	spec, err := json.Marshal(storedSpec{Definition: withoutResets(d), Secret: d.SigningSecret})
	if err != nil {
		return nil, fmt.Errorf("projection definition: %w", err)
	}
	return spec, nil
}

// foreign reports a projection in Go whose code is not registered in this
// Projector at the stored version.
func (c *compiled) foreign() bool { return c.def.Code != nil && c.code == nil }

// isCodeSpec reports whether a stored spec is that of a projection in Go.
func isCodeSpec(spec []byte) bool {
	d, err := decodeSpec(spec)
	return err == nil && d.Code != nil
}

// Register adds cp to the Projector, which applies it from then on like
// a stored Definition, and stores its definition record. Call it at
// start, before Run, in every process that should apply cp. The same name
// twice, or a stored Definition's, is ErrConflict; an invalid cp a
// *ValidationError.
//
// A higher Version than the stored one is rebuilt as a replacement, as
// Put does, and takes over once caught up; a process registering a lower
// one applies nothing of it and logs a warning. So during a rolling
// deployment the new version's processes build and take over the
// projection while the old ones step aside (docs/library.md).
func (p *Projector) Register(ctx context.Context, cp CodeProjection) error {
	c, err := compileCode(cp)
	if err != nil {
		return err
	}
	if err := p.checkOpen("register projection", cp.Name); err != nil {
		return err
	}
	p.mu.Lock()
	if p.code[cp.Name] != nil {
		p.mu.Unlock()
		return fmt.Errorf("register projection %q: %w: already registered in this Projector", cp.Name, ErrConflict)
	}
	p.code[cp.Name] = c
	delete(p.projs, cp.Name) // compiled before the code was known
	delete(p.projs, cp.Name+replacementSuffix)
	p.mu.Unlock()
	if err := p.storeCode(ctx, c); err != nil {
		p.mu.Lock()
		delete(p.code, cp.Name)
		p.mu.Unlock()
		return err
	}
	p.wake()
	return nil
}

// storeCode stores the definition record of the projection in Go c, or
// its replacement when the stored one is of a lower version.
func (p *Projector) storeCode(ctx context.Context, c *compiled) error {
	name, version := c.def.Name, c.def.Code.Version
	wrap := func(err error) error { return fmt.Errorf("register projection %q: %w", name, err) }
	for attempt := 1; ; attempt++ {
		retry := attempt < maxPutAttempts
		rec, err := p.storage.Definition(ctx, name)
		switch {
		case errors.Is(err, ErrNotFound):
			if err := p.checkCount(ctx); err != nil {
				return err
			}
			err := p.storage.CreateDefinition(ctx, p.record(name, c, 0, 0))
			if errors.Is(err, ErrConflict) && retry {
				continue // created meanwhile, perhaps by another process
			}
			if err != nil {
				return wrap(err)
			}
			return nil
		case err != nil:
			return wrap(err)
		}
		d, err := decodeSpec(rec.Spec)
		if err != nil || d.Code == nil {
			return wrap(fmt.Errorf("%w: a projection definition of that name exists (not written in Go); delete it first", ErrConflict))
		}
		resets, applied := specCounts(rec.Spec)
		switch stored := d.Code.Version; {
		case stored > version:
			p.log.Warn("eventstore: the store holds a newer version of this projection in Go; this process does not apply it",
				"projection", name, "version", version, "storedVersion", stored)
			return nil
		case stored == version:
			// The same code: keep the record current (description, event
			// types), no rebuild.
			want := specWith(c, resets, applied)
			if bytes.Equal(want, rec.Spec) {
				return nil
			}
			err := p.storage.UpdateSpec(ctx, name, rec.Spec, want)
			if (errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound)) && retry {
				continue
			}
			if err != nil {
				return wrap(err)
			}
			return nil
		}
		// An older version is stored: build this one beside it.
		shadow := name + replacementSuffix
		pending, err := p.storage.Definition(ctx, shadow)
		switch {
		case err == nil:
			if pd, err := decodeSpec(pending.Spec); err == nil && pd.Code != nil && pd.Code.Version >= version {
				if pd.Code.Version > version {
					p.log.Warn("eventstore: a newer version of this projection in Go is being built; this process does not apply it",
						"projection", name, "version", version, "buildingVersion", pd.Code.Version)
				}
				return nil // this version is being built (perhaps by another process), or a newer one
			}
			if err := p.storage.DeleteDefinition(ctx, shadow); err != nil && !errors.Is(err, ErrNotFound) {
				return wrap(err)
			}
			p.forget(shadow)
		case !errors.Is(err, ErrNotFound):
			return wrap(err)
		}
		err = p.storage.CreateDefinition(ctx, p.record(shadow, c, resets, applied))
		if errors.Is(err, ErrConflict) && retry {
			continue
		}
		if err != nil {
			return wrap(err)
		}
		p.log.Info("eventstore: rebuilding a projection in Go for its new version", "projection", name, "version", version, "storedVersion", d.Code.Version)
		return nil
	}
}

// skipForeign logs, once per stored version, that pr is a projection in
// Go this Projector does not apply, and returns errForeignCode. pr.mu is
// held.
func (p *Projector) skipForeign(pr *proj, c *compiled) error {
	if v := c.def.Code.Version; pr.warned != v {
		pr.warned = v
		base := strings.TrimSuffix(pr.name, replacementSuffix)
		mine := int64(0)
		if reg := p.registered(base); reg != nil {
			mine = reg.def.Code.Version
		}
		p.log.Warn("eventstore: projection in Go not applied by this process: its code is not registered here at the stored version",
			"projection", pr.name, "storedVersion", v, "registeredVersion", mine)
	}
	return errForeignCode
}
