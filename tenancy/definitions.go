package tenancy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/hooks"
	"github.com/eventkit-go/eventstore/reactions"
)

// definitionsEvery is how often a Set that has open tenants reads the
// project's definitions, to pass on to them the changes that other
// processes made (followDefinitions).
const definitionsEvery = time.Second

// tenantDefinitionsPoll is the hooks.DefinitionsPoll of the
// tenants' Projectors when Options.Projector does not set it: the Set
// passes every change of the project's definitions on to its open tenants
// (at once when made through it, else within definitionsEvery), so that a
// tenant's Projector lists its definitions again only as a safety net. Left
// at the default of a second, each tenant's Projector read its definitions
// at nearly every save when saves went round a thousand tenants.
const tenantDefinitionsPoll = 30 * time.Second

// followDefinitions passes on, every definitionsEvery until the Set
// closes, the changes of the project's definitions that this process did
// not make to every open tenant (passDefinitionsOn).
func (s *Set) followDefinitions() {
	t := time.NewTicker(definitionsEvery)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if err := s.passDefinitionsOn(s.ctx); err != nil && s.ctx.Err() == nil {
			s.log.Warn("tenancy: passing the project's definitions on to open tenants failed; trying again", "err", err)
		}
	}
}

// passDefinitionsOn makes the definitions of every open tenant those of
// the project, for the tenants whose definitions were last made equal to
// other ones than the project has now. It reads nothing while no tenant
// is open, and only the project's definitions while none changed.
func (s *Set) passDefinitionsOn(ctx context.Context) error {
	s.defsMu.Lock()
	defer s.defsMu.Unlock()
	// The open tenants first, the definitions after: a tenant opened
	// before this list got the definitions earlier than they are read
	// below, so that a round never puts older ones than a tenant has.
	s.mu.Lock()
	var open []*entry
	for _, e := range s.order {
		if e.open != nil {
			open = append(open, e)
		}
	}
	s.mu.Unlock()
	if len(open) == 0 {
		return nil
	}
	pd, err := s.projectDefinitions(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	var stale []*entry
	for _, e := range open {
		if e.open != nil && e.open.defs != pd.print {
			stale = append(stale, e)
		}
	}
	s.mu.Unlock()
	var first error
	for _, e := range stale {
		// Hold the instance as a user does, one at a time, so that a
		// Delete or Close waits for one tenant at most.
		s.mu.Lock()
		in := e.open
		if in != nil {
			in.inflight.RLock() // attached, so no closer waits on it
		}
		s.mu.Unlock()
		if in == nil {
			continue
		}
		err := s.applyDefinitions(ctx, in, pd)
		if err == nil {
			s.mu.Lock()
			in.defs = pd.print
			s.mu.Unlock()
		}
		in.inflight.RUnlock()
		if err != nil && first == nil {
			first = fmt.Errorf("tenant %s: %w", e.t.ID, err)
		}
	}
	return first
}

// ReactionDefinitionsChanged passes the reaction definitions of the
// project (Options.Reactions) on to every open tenant at once; call it
// after creating, replacing or deleting one (the HTTP API does). Without
// the call they reach the tenants within definitionsEvery. Tenants opened
// later get them at open.
func (s *Set) ReactionDefinitionsChanged(ctx context.Context) error {
	if err := s.passDefinitionsOn(ctx); err != nil {
		return fmt.Errorf("tenancy: %w", err)
	}
	return nil
}

// definitions are the project's definitions, as a tenant gets them.
type definitions struct {
	projections []eventstore.Definition
	reactions   []reactions.Definition // nil without Options.Reactions
	print       string                 // a fingerprint of both
}

// projectDefinitions reads the project's definitions.
func (s *Set) projectDefinitions(ctx context.Context) (definitions, error) {
	var pd definitions
	var err error
	if pd.projections, err = s.opts.Definitions.Definitions(ctx); err != nil {
		return pd, fmt.Errorf("read the project's definitions: %w", err)
	}
	// Projections written in Go (Projector.Register) are code of the
	// project's process: they are not passed on to tenants.
	pd.projections = slices.DeleteFunc(pd.projections, func(d eventstore.Definition) bool { return d.Code != nil })
	if s.opts.Reactions != nil {
		if pd.reactions, err = s.opts.Reactions.Definitions(ctx); err != nil {
			return pd, fmt.Errorf("read the project's reaction definitions: %w", err)
		}
	}
	h := sha256.New()
	for _, d := range pd.projections {
		b, _ := json.Marshal(d) // a Definition always encodes
		fmt.Fprintf(h, "p%d:%s%d:%s%d", len(b), b, len(d.SigningSecret), d.SigningSecret, *hooks.DefinitionResets(&d))
	}
	for _, d := range pd.reactions {
		b, _ := json.Marshal(d) // signing secrets included
		fmt.Fprintf(h, "r%d:%s", len(b), b)
	}
	pd.print = hex.EncodeToString(h.Sum(nil))
	return pd, nil
}

// applyDefinitions makes the definitions of in those of pd, and runs its
// reactions Engine while there is a reaction definition (an Engine
// without any would only poll). Either in is not shared yet, or the
// caller holds defsMu and in.inflight for reading.
func (s *Set) applyDefinitions(ctx context.Context, in *instance, pd definitions) error {
	if err := putDefinitions(ctx, in.p, pd.projections); err != nil {
		return err
	}
	if in.r == nil {
		return nil
	}
	if _, err := in.r.SyncDefinitions(ctx, pd.reactions); err != nil {
		return err
	}
	switch {
	case len(pd.reactions) > 0 && in.rdone == nil:
		rctx, stop := context.WithCancel(in.ctx)
		done := make(chan struct{})
		in.rstop, in.rdone = stop, done
		s.running.Add(1)
		go func() {
			defer s.running.Done()
			defer close(done)
			_ = in.r.Run(rctx)
		}()
	case len(pd.reactions) == 0 && in.rdone != nil:
		in.rstop()
		<-in.rdone
		in.rstop, in.rdone = nil, nil
	}
	return nil
}

// putDefinitions makes p's definitions want.
func putDefinitions(ctx context.Context, p *eventstore.Projector, want []eventstore.Definition) error {
	names := map[string]bool{}
	for _, d := range want {
		names[d.Name] = true
		if _, err := p.Put(ctx, d); err != nil {
			return fmt.Errorf("put definition %s: %w", d.Name, err)
		}
	}
	have, err := p.Definitions(ctx)
	if err != nil {
		return err
	}
	for _, d := range have {
		if !names[d.Name] && d.Code == nil {
			if err := p.Delete(ctx, d.Name); err != nil && !errors.Is(err, eventstore.ErrNotFound) {
				return fmt.Errorf("delete definition %s: %w", d.Name, err)
			}
		}
	}
	return nil
}

// DefinitionChanged passes a change of the project's definition name on
// to every open tenant: it is put, or deleted when the project has no
// such definition any more; reset says the project's projection was
// reset (Projector.Reset), which the definition then counts: each tenant
// resets its instances once for each reset counted. Tenants opened later,
// and those open in other processes (within definitionsEvery), get the
// definitions, resets included, the same way. It tries every tenant and
// returns the first error.
func (s *Set) DefinitionChanged(ctx context.Context, name string, reset bool) error {
	s.defsMu.Lock() // no round of followDefinitions puts what it read before
	defer s.defsMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	d, derr := s.opts.Definitions.Definition(ctx, name)
	if derr != nil && !errors.Is(derr, eventstore.ErrNotFound) {
		return derr
	}
	if derr == nil && d.Code != nil {
		return nil // a projection written in Go is not passed on to tenants
	}
	var first error
	for _, e := range s.order {
		if e.open == nil {
			continue
		}
		p := e.open.p
		var err error
		switch {
		case derr != nil && !reset:
			err = p.Delete(ctx, name)
		case derr != nil:
			err = derr
		default:
			// A reset comes as the project's definition with one more
			// reset counted (hooks.DefinitionResets), which Put applies once,
			// whichever process or tenant open passes it on first.
			_, err = p.Put(ctx, d)
		}
		if err != nil && !errors.Is(err, eventstore.ErrNotFound) && first == nil {
			first = fmt.Errorf("tenancy: tenant %s: definition %s: %w", e.t.ID, name, err)
		}
	}
	return first
}
