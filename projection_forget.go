package eventstore

import (
	"context"
	"fmt"
)

// forgetFeed is called by the Store after events of aggregateType were
// deleted. It makes p rebuild every projection whose feed is
// aggregateType: with reset, it resets each of them in the storage
// (Storage.ResetProjection: no instances, checkpoint 0); in any case it
// drops p's own record of how far they were applied, and wakes Run.
func (p *Projector) forgetFeed(ctx context.Context, aggregateType string, reset bool) error {
	recs, err := p.storage.Definitions(ctx)
	if err != nil {
		return fmt.Errorf("reset projections of %s: %w", aggregateType, err)
	}
	for _, rec := range recs {
		pr, err := p.lookupStored(ctx, rec.Name)
		if err != nil {
			return fmt.Errorf("reset projections of %s: %w", aggregateType, err)
		}
		if !pr.c.Load().reads(aggregateType) {
			continue
		}
		// Holding pr.mu keeps this process's catch-up of pr out while the
		// storage is reset; other processes' commits fail on the
		// checkpoint and start again from 0.
		pr.mu.Lock()
		if reset {
			err = p.storage.ResetProjection(ctx, rec.Name)
		}
		if err == nil || isNotFound(err) {
			pr.checkpoint.Store(0)
			err = nil
		}
		pr.mu.Unlock()
		if err != nil {
			return fmt.Errorf("reset projection %q: %w", rec.Name, err)
		}
	}
	p.wake()
	return nil
}

// forgetCheckpoints drops p's record of how far each of its projections
// was applied, as forgetFeed does for one feed, without touching the
// storage.
func (p *Projector) forgetCheckpoints() {
	p.mu.Lock()
	prs := make([]*proj, 0, len(p.projs))
	for _, pr := range p.projs {
		prs = append(prs, pr)
	}
	p.mu.Unlock()
	for _, pr := range prs {
		pr.mu.Lock()
		pr.checkpoint.Store(0)
		pr.mu.Unlock()
	}
}
