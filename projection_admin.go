package eventstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore/internal/names"
	"github.com/eventkit-go/eventstore/storage"
)

// Create stores a new definition, built from its feed's whole history.
// An existing name is ErrConflict (Put creates or replaces); an invalid
// definition a *ValidationError naming each bad field.
func (p *Projector) Create(ctx context.Context, d Definition) error {
	c, err := compile(d)
	if err != nil {
		return err
	}
	if err := p.checkOpen("create projection", d.Name); err != nil {
		return err
	}
	if err := p.checkFunctions(ctx, "projection definition", c); err != nil {
		return err
	}
	if err := p.checkCount(ctx); err != nil {
		return err
	}
	// Built from the start, a new projection has every reset of its
	// source's definition behind it.
	if err := p.storage.CreateDefinition(ctx, p.record(d.Name, c, 0, d.resets)); err != nil {
		if rec, rerr := p.storage.Definition(ctx, d.Name); errors.Is(err, ErrConflict) && rerr == nil && isCodeSpec(rec.Spec) {
			err = errCodeProjection
		}
		return fmt.Errorf("create projection %q: %w", d.Name, err)
	}
	p.wake()
	return nil
}

// PutResult says what Projector.Put did.
type PutResult uint8

// Outcomes of Put.
const (
	PutCreated   PutResult = iota + 1 // there was no definition of that name
	PutUnchanged                      // the stored definition is the same
	// PutReplacing: a different definition is rebuilt from history, and
	// takes over once caught up; queries answer from the current one.
	PutReplacing
	PutUpdated // only Description or SigningSecret differed: stored in place, no rebuild
)

// String returns "created", "unchanged", "replacing" or "updated".
func (r PutResult) String() string {
	switch r {
	case PutCreated:
		return "created"
	case PutUnchanged:
		return "unchanged"
	case PutReplacing:
		return "replacing"
	case PutUpdated:
		return "updated"
	}
	return fmt.Sprintf("PutResult(%d)", uint8(r))
}

// Put creates the definition or replaces the one of that name, so a
// program may call it at every start: an identical one changes nothing,
// one differing in Description or SigningSecret only is updated in place.
// A replacement is rebuilt from history and takes over once caught up,
// which CatchUp(ctx, d.Name) waits for.
func (p *Projector) Put(ctx context.Context, d Definition) (PutResult, error) {
	c, err := compile(d)
	if err != nil {
		return 0, err
	}
	if err := p.checkOpen("put projection", d.Name); err != nil {
		return 0, err
	}
	if err := p.checkFunctions(ctx, "projection definition", c); err != nil {
		return 0, err
	}
	// A description is updated only from the spec just read: when another
	// Put or a swap changes it in between, start again from what is
	// stored then.
	for attempt := 1; ; attempt++ {
		res, err := p.put(ctx, d, c)
		if errors.Is(err, errSpecMoved) && attempt < maxPutAttempts {
			continue
		}
		return res, err
	}
}

// maxPutAttempts bounds how often Put starts again when the stored
// definition changes under it.
const maxPutAttempts = 5

// errSpecMoved reports that a definition changed between reading its
// spec and updating its description.
var errSpecMoved = fmt.Errorf("%w: the definition changed meanwhile", ErrConflict)

func (p *Projector) put(ctx context.Context, d Definition, c *compiled) (PutResult, error) {
	rec, err := p.storage.Definition(ctx, d.Name)
	switch {
	case errors.Is(err, ErrNotFound):
		if err := p.Create(ctx, d); err != nil {
			if errors.Is(err, ErrConflict) && !errors.Is(err, errCodeProjection) {
				// Created meanwhile, by another Put of the same name (two
				// processes passing a project's definition on to the
				// tenant store they share): start again from what is
				// stored now.
				return 0, errSpecMoved
			}
			return 0, err
		}
		return PutCreated, nil
	case err != nil:
		return 0, fmt.Errorf("put projection %q: %w", d.Name, err)
	}
	if isCodeSpec(rec.Spec) {
		return 0, fmt.Errorf("put projection %q: %w", d.Name, errCodeProjection)
	}
	resets, applied := specCounts(rec.Spec)
	if d.resets > applied {
		// A reset of the definition d was read from, not applied here yet.
		if err := p.applyReset(ctx, d.Name, d.resets); err != nil {
			return 0, err
		}
		if rec, err = p.storage.Definition(ctx, d.Name); err != nil {
			return 0, fmt.Errorf("put projection %q: %w", d.Name, err)
		}
		resets, applied = specCounts(rec.Spec)
	}
	shadow := d.Name + replacementSuffix
	if diff := compareSpec(rec.Spec, c); diff != specOther {
		// Back to the current definition: drop a pending replacement.
		if err := p.storage.DeleteDefinition(ctx, shadow); err != nil && !errors.Is(err, ErrNotFound) {
			return 0, fmt.Errorf("put projection %q: %w", d.Name, err)
		}
		p.forget(shadow)
		if diff == specSame {
			return PutUnchanged, nil
		}
		if err := p.updateSpec(ctx, d.Name, rec.Spec, specWith(c, resets, applied)); err != nil {
			return 0, err
		}
		return PutUpdated, nil
	}
	if pending, err := p.storage.Definition(ctx, shadow); err == nil {
		switch compareSpec(pending.Spec, c) {
		case specSame:
			return PutReplacing, nil
		case specDescription:
			if err := p.updateSpec(ctx, shadow, pending.Spec, specWith(c, resets, applied)); err != nil {
				return 0, err
			}
			return PutReplacing, nil
		}
	}
	if err := p.storage.DeleteDefinition(ctx, shadow); err != nil && !errors.Is(err, ErrNotFound) {
		return 0, fmt.Errorf("put projection %q: %w", d.Name, err)
	}
	p.forget(shadow)
	if err := p.storage.CreateDefinition(ctx, p.record(shadow, c, resets, applied)); err != nil {
		return 0, fmt.Errorf("put projection %q: %w", d.Name, err)
	}
	p.wake()
	return PutReplacing, nil
}

// updateSpec stores spec as the spec of the stored definition name, whose
// spec was old. It returns errSpecMoved when that is no longer so. The
// projector applying it meets the new spec at its next commit, which is
// refused, and goes on from the same checkpoint with it.
func (p *Projector) updateSpec(ctx context.Context, name string, old, spec []byte) error {
	err := p.storage.UpdateSpec(ctx, name, old, spec)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrConflict), errors.Is(err, ErrNotFound):
		return fmt.Errorf("put projection %q: %w", strings.TrimSuffix(name, replacementSuffix), errSpecMoved)
	}
	return fmt.Errorf("put projection %q: %w", strings.TrimSuffix(name, replacementSuffix), err)
}

// specDiff is how a stored spec differs from a definition being put.
type specDiff uint8

const (
	specSame        specDiff = iota // the same definition
	specDescription                 // the same but for the description
	specOther                       // a definition that computes otherwise
)

// compareSpec compares a stored spec with the compiled definition c.
func compareSpec(stored []byte, c *compiled) specDiff {
	if string(stored) == string(c.spec) {
		return specSame
	}
	d, err := decodeSpec(stored)
	if err != nil {
		return specOther
	}
	desc, secret := d.Description, d.SigningSecret
	d.Description, d.SigningSecret = c.def.Description, c.def.SigningSecret
	sc, err := compile(d)
	switch {
	case err != nil || string(sc.spec) != string(c.spec):
		return specOther
	case desc == c.def.Description && secret == c.def.SigningSecret:
		return specSame
	}
	return specDescription
}

// record is the stored definition name of c, with the reset counts
// (specWith).
func (p *Projector) record(name string, c *compiled, resets, applied int64) storage.DefinitionRecord {
	return storage.DefinitionRecord{Name: name, Spec: specWith(c, resets, applied), CreatedAt: p.store.now().UTC().Truncate(time.Microsecond)}
}

func (p *Projector) checkOpen(op, name string) error {
	if p.store.closed.Load() {
		return fmt.Errorf("%s %q: %w", op, name, ErrClosed)
	}
	return nil
}

// checkCount refuses a definition beyond MaxDefinitions.
func (p *Projector) checkCount(ctx context.Context) error {
	recs, err := p.storage.Definitions(ctx)
	if err != nil {
		return fmt.Errorf("projections: %w", err)
	}
	n := 0
	for _, r := range recs {
		if !strings.HasSuffix(r.Name, replacementSuffix) {
			n++
		}
	}
	if n >= p.maxDefs {
		return &ValidationError{Op: "projection definition", Fields: []FieldError{{Field: "projectionName", Message: fmt.Sprintf("at most %d projection definitions are allowed", p.maxDefs)}}}
	}
	return nil
}

// Delete removes the projection with its instances and any pending
// replacement; the name can be used again. A projection in Go registered
// in this Projector is not deleted (ErrConflict): one no longer registered
// anywhere may be.
func (p *Projector) Delete(ctx context.Context, name string) error {
	if err := checkProjectionName(name); err != nil {
		return err
	}
	if err := p.checkOpen("delete projection", name); err != nil {
		return err
	}
	if p.registered(name) != nil {
		return fmt.Errorf("delete projection %q: %w: it is registered in this Projector", name, errCodeProjection)
	}
	pr := p.cached(name)
	if pr != nil {
		pr.mu.Lock()
		defer pr.mu.Unlock()
	}
	err := p.storage.DeleteDefinition(ctx, name)
	if err2 := p.storage.DeleteDefinition(ctx, name+replacementSuffix); err2 != nil && !errors.Is(err2, ErrNotFound) && err == nil {
		err = err2
	}
	p.forget(name)
	p.forget(name + replacementSuffix)
	if err != nil {
		return wrapNotFound(fmt.Sprintf("projection %q", name), err)
	}
	return nil
}

// Reset drops every instance of the projection, to be rebuilt from the
// start of the feed (by the next query, CatchUp or Run).
func (p *Projector) Reset(ctx context.Context, name string) error {
	// The reset is counted before the instances are dropped: should the
	// drop fail, the caller gets the error and tries again, and stores
	// the definition is passed on to (Definition.Resets) reset once more,
	// rather than miss a reset that happened here.
	return p.reset(ctx, name, func() error {
		// Count the reset in the stored definition, and in a replacement
		// being built (which keeps its spec when it takes over), so that
		// Put passes it on to projections built from this definition
		// (Definition.Resets).
		for _, n := range []string{name, name + replacementSuffix} {
			if err := p.countReset(ctx, n, 1, 0); err != nil && (n == name || !errors.Is(err, ErrNotFound)) {
				return wrapNotFound(fmt.Sprintf("reset projection %q: counting the reset", name), err)
			}
		}
		return nil
	}, nil)
}

// applyReset resets projection name for a reset of the definition it was
// put from (Definition.Resets), and records that one as applied once the
// instances are dropped.
func (p *Projector) applyReset(ctx context.Context, name string, applied int64) error {
	return p.reset(ctx, name, nil, func() error {
		if err := p.countReset(ctx, name, 0, applied); err != nil {
			return fmt.Errorf("put projection %q: the projection is reset, its reset not recorded: %w", name, err)
		}
		return nil
	})
}

// reset runs before (when not nil), drops the instances of projection
// name in the storage and its checkpoint in this Projector, then runs
// after (when not nil), the projection held throughout so that no
// catch-up of this process commits in between.
func (p *Projector) reset(ctx context.Context, name string, before, after func() error) error {
	pr, err := p.lookup(ctx, name)
	if err != nil {
		return err
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if before != nil {
		if err := before(); err != nil {
			return err
		}
	}
	if err := p.storage.ResetProjection(ctx, name); err != nil {
		return wrapNotFound(fmt.Sprintf("projection %q", name), err)
	}
	pr.checkpoint.Store(0)
	p.wake()
	if after != nil {
		return after()
	}
	return nil
}

// countReset adds add to the stored definition name's count of resets and
// raises its applied count to at least applied, keeping its spec
// otherwise (a compare-and-set, tried again when the spec moved).
func (p *Projector) countReset(ctx context.Context, name string, add, applied int64) error {
	for attempt := 1; ; attempt++ {
		rec, err := p.storage.Definition(ctx, name)
		if err != nil {
			return err
		}
		c, err := p.decodeStored(rec)
		if err != nil {
			return err
		}
		r, a := specCounts(rec.Spec)
		err = p.storage.UpdateSpec(ctx, name, rec.Spec, specWith(c, r+add, max(a, applied)))
		if err == nil || !errors.Is(err, ErrConflict) || attempt == maxPutAttempts {
			return err
		}
	}
}

func checkProjectionName(name string) error {
	if msg := names.Problem(name); msg != "" {
		return &ValidationError{Op: "projection", Fields: []FieldError{{Field: "projectionName", Message: msg}}}
	}
	return nil
}

// Definition returns the definition last given to Put or Create (maybe
// a replacement still being rebuilt), or ErrNotFound.
func (p *Projector) Definition(ctx context.Context, name string) (Definition, error) {
	if err := checkProjectionName(name); err != nil {
		return Definition{}, err
	}
	if err := p.checkOpen("projection", name); err != nil {
		return Definition{}, err
	}
	// The replacement first: once it is swapped in it is gone under its
	// own name and found under name, so this order never misses it. The
	// stored records are read, not this Projector's compiled copy, which
	// lags a swap until the projection next catches up.
	rec, err := p.storage.Definition(ctx, name+replacementSuffix)
	if errors.Is(err, ErrNotFound) {
		rec, err = p.storage.Definition(ctx, name)
	}
	if err != nil {
		return Definition{}, wrapNotFound(fmt.Sprintf("projection %q", name), err)
	}
	c, err := p.decodeStored(rec)
	if err != nil {
		return Definition{}, err
	}
	c.def.Name = name
	return c.def, nil
}

// Definitions returns every definition, by name, as Definition does.
func (p *Projector) Definitions(ctx context.Context) ([]Definition, error) {
	recs, err := p.storage.Definitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("projections: %w", err)
	}
	pending := make(map[string]storage.DefinitionRecord)
	for _, rec := range recs {
		if base, ok := strings.CutSuffix(rec.Name, replacementSuffix); ok {
			pending[base] = rec
		}
	}
	out := make([]Definition, 0, len(recs))
	for _, rec := range recs {
		if strings.HasSuffix(rec.Name, replacementSuffix) {
			continue
		}
		if next, ok := pending[rec.Name]; ok {
			rec = next
		}
		c, err := p.decodeStored(rec)
		if err != nil {
			return nil, err
		}
		c.def.Name = strings.TrimSuffix(rec.Name, replacementSuffix)
		out = append(out, c.def)
	}
	return out, nil
}
