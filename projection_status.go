package eventstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/eventkit-go/eventstore/storage"
)

// Status returns the projection's definition, progress, instance count
// and recent errors, or ErrNotFound.
func (p *Projector) Status(ctx context.Context, name string) (Status, error) {
	if err := checkProjectionName(name); err != nil {
		return Status{}, err
	}
	mark := p.rebuildMark()
	rec, err := p.storage.Definition(ctx, name)
	if err != nil {
		return Status{}, wrapNotFound(fmt.Sprintf("projection %q", name), err)
	}
	var next *storage.DefinitionRecord
	switch r, err := p.storage.Definition(ctx, name+replacementSuffix); {
	case err == nil:
		next = &r
	case !errors.Is(err, ErrNotFound):
		return Status{}, fmt.Errorf("projection %q: %w", name, err)
	}
	head, err := p.storage.FeedHead(ctx, "")
	if err != nil {
		return Status{}, fmt.Errorf("projection %q: %w", name, err)
	}
	return p.status(ctx, rec, next, head, mark)
}

// status completes the Status of rec, whose replacement being rebuilt is
// next (nil for none), with the feed's head; rec was read after mark
// (rebuildMark).
func (p *Projector) status(ctx context.Context, rec storage.DefinitionRecord, next *storage.DefinitionRecord, head int64, mark uint64) (Status, error) {
	c, err := p.decodeStored(rec)
	if err != nil {
		return Status{}, err
	}
	st := Status{Definition: c.def, Checkpoint: rec.Checkpoint, Head: head, Errors: rec.Errors}
	if head > rec.Checkpoint {
		// One probe of the projection's own feed: events of other types
		// stored after the checkpoint are nothing to apply.
		page, err := p.storage.ReadFeed(ctx, storage.FeedQuery{After: rec.Checkpoint, Limit: 1, AggregateType: c.feed, MaxBytes: 1})
		if err != nil {
			return Status{}, fmt.Errorf("projection %q: %w", rec.Name, err)
		}
		if len(page.Events) > 0 {
			st.Behind = head - rec.Checkpoint
		}
	}
	list, err := p.storage.ListProjections(ctx, storage.ProjectionQuery{Name: rec.Name})
	if err != nil {
		return Status{}, fmt.Errorf("projection %q: %w", rec.Name, err)
	}
	st.Instances = list.Total
	st.RebuildReason = p.rebuildReason(rec.Name, rec.Checkpoint, st.Behind, mark)
	if next != nil {
		st.Rebuilding, st.RebuildCheckpoint = true, next.Checkpoint
	}
	return st, nil
}

// Statuses returns the Status of every projection, by name.
func (p *Projector) Statuses(ctx context.Context) ([]Status, error) {
	mark := p.rebuildMark()
	recs, err := p.storage.Definitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("projections: %w", err)
	}
	head, err := p.storage.FeedHead(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("projections: %w", err)
	}
	replacements := make(map[string]*storage.DefinitionRecord)
	for i := range recs {
		if name, ok := strings.CutSuffix(recs[i].Name, replacementSuffix); ok {
			replacements[name] = &recs[i]
		}
	}
	out := make([]Status, 0, len(recs)-len(replacements))
	for _, rec := range recs {
		if strings.HasSuffix(rec.Name, replacementSuffix) {
			continue
		}
		st, err := p.status(ctx, rec, replacements[rec.Name], head, mark)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
