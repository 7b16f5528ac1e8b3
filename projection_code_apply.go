package eventstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/eventkit-go/eventstore/internal/lang"
	"github.com/eventkit-go/eventstore/internal/names"
	"github.com/eventkit-go/eventstore/storage"
)

// codeInstance is an instance of a projection in Go being changed by a
// page of events.
type codeInstance struct {
	base   storage.ProjectionState // as stored before the page (Data nil when new)
	stored bool
	events []*Event  // of the page, applied to it in order
	st     CodeState // decoded state, nil until an event needs it
	from   []byte    // what st is decoded from when nil: base.Data, or nil after a drop
	failed bool      // some event failed: the page is folded again one event at a time
	meta   storage.ProjectionState
	// changed: an event applied; deleted: the last change dropped it.
	changed, deleted bool
}

// applyCode is apply for a projection in Go: each instance the page
// touches is decoded once, folded by its code event by event, and encoded
// once. When an event of an instance fails, that instance's events of the
// page are folded again from its stored state one at a time, each encoded
// and checked, so that every failing event is recorded and changes
// nothing (foldOneByOne).
func (p *Projector) applyCode(ctx context.Context, pr *proj, c *compiled, from int64, page storage.FeedPage, gen int64) (storage.ProjectionCommit, error) {
	name, cp := pr.name, c.code
	commit := storage.ProjectionCommit{Name: name, From: from, To: page.Head}
	insts := make(map[string]*codeInstance)
	var order []string
	for i := range page.Events {
		e := &page.Events[i]
		if c.handler(e) == nil {
			continue
		}
		id, err := codeKey(cp, e)
		if err != nil {
			commit.Errors = append(commit.Errors, projectionError(e, "", err))
			continue
		}
		in := insts[id]
		if in == nil {
			in = &codeInstance{}
			insts[id] = in
			order = append(order, id)
		}
		in.events = append(in.events, e)
	}
	if len(order) == 0 {
		return commit, nil
	}
	load := order
	if pr.recent != nil && pr.recentAt == from && pr.recentGen == gen && p.store.deleting.Load() == 0 {
		load = nil
		for _, id := range order {
			if st, ok := pr.recent[id]; ok {
				insts[id].base, insts[id].stored = st, true
			} else {
				load = append(load, id)
			}
		}
	}
	for chunk := range slices.Chunk(load, 1000) {
		states, err := p.storage.LoadProjections(ctx, name, chunk)
		if err != nil {
			return storage.ProjectionCommit{}, fmt.Errorf("projection %q: load instances: %w", name, err)
		}
		for _, st := range states {
			if in := insts[st.InstanceID]; in != nil {
				in.base, in.stored = st, true
			}
		}
	}
	for _, id := range order {
		in := insts[id]
		if !in.stored {
			in.base = storage.ProjectionState{Name: name, InstanceID: id}
		}
		in.meta, in.from = in.base, in.base.Data
		for _, e := range in.events {
			if err := in.apply(cp, e); err != nil {
				in.failed = true
				break
			}
		}
		var data []byte
		if !in.failed && in.changed && !in.deleted {
			var err error
			if data, err = encodeState(in.st, p.maxInstance); err != nil {
				in.failed = true
			}
		}
		if in.failed {
			data = p.foldOneByOne(cp, in, &commit)
		}
		switch {
		case !in.changed:
		case in.deleted:
			if in.stored {
				commit.Deletes = append(commit.Deletes, id)
			}
		default:
			in.meta.Data = data
			in.meta.SearchText = ""
			commit.States = append(commit.States, in.meta)
		}
	}
	return commit, nil
}

// apply folds e into in, decoding its state first if need be.
func (in *codeInstance) apply(cp *CodeProjection, e *Event) error {
	if in.st == nil {
		st, err := cp.Decode(in.from)
		if err != nil {
			return fmt.Errorf("the stored instance does not decode: %w", err)
		}
		if st == nil {
			return errors.New("Decode returned no state")
		}
		in.st = st
	}
	err := in.st.Apply(e)
	switch {
	case errors.Is(err, DropInstance):
		in.st, in.from = nil, nil
		in.changed, in.deleted = true, true
		in.meta.CreatedAt, in.meta.Reference = time.Time{}, Reference{}
		return nil
	case err != nil:
		return err
	}
	in.changed, in.deleted = true, false
	if in.meta.CreatedAt.IsZero() {
		in.meta.CreatedAt = e.RecordedAt
	}
	in.meta.UpdatedAt, in.meta.Position = e.RecordedAt, e.Position
	return nil
}

// foldOneByOne folds the page's events of in again from its stored state,
// encoding the state after each: an event that fails, or after which the
// state does not encode to an object within the size limit, is recorded in
// commit and undone by decoding the last good encoding. It returns the
// encoding of the final state.
func (p *Projector) foldOneByOne(cp *CodeProjection, in *codeInstance, commit *storage.ProjectionCommit) []byte {
	in.st, in.from, in.meta = nil, in.base.Data, in.base
	in.changed, in.deleted = false, false
	good := in.base.Data
	for _, e := range in.events {
		saved := in.meta
		changed, deleted := in.changed, in.deleted
		err := in.apply(cp, e)
		var data []byte
		if err == nil && !in.deleted {
			data, err = encodeState(in.st, p.maxInstance)
		}
		if err != nil {
			commit.Errors = append(commit.Errors, projectionError(e, in.meta.InstanceID, err))
			in.meta, in.changed, in.deleted = saved, changed, deleted
			in.st, in.from = nil, good
			continue
		}
		good = data // nil after a drop
		in.from = good
	}
	return good
}

// encodeState encodes st as a projection instance: a JSON object of at
// most limit bytes.
func encodeState(st CodeState, limit int) ([]byte, error) {
	data, err := st.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("the state does not encode: %w", err)
	}
	data = bytes.TrimSpace(data)
	switch {
	case len(data) > limit:
		return nil, fmt.Errorf("the instance would grow to %d bytes, over the limit of %d: %w", len(data), limit, lang.ErrTooLarge)
	case len(data) == 0 || data[0] != '{' || !json.Valid(data):
		return nil, fmt.Errorf("the state must encode to a JSON object, not %s", clip(string(data)))
	}
	return data, nil
}

// codeKey returns the id of the instance e changes.
func codeKey(cp *CodeProjection, e *Event) (string, error) {
	switch {
	case cp.Aggregated:
		return "", nil
	case cp.Key == nil:
		return e.AggregateID, nil
	}
	id, err := cp.Key(e)
	if err != nil {
		return "", fmt.Errorf("key: %w", err)
	}
	if msg := names.Problem(id); msg != "" {
		return "", fmt.Errorf("key: the id %s", msg)
	}
	return id, nil
}
