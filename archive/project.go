package archive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/tenancy"
)

// Project is a data space with what goes with its events: its projection
// and reaction definitions and its tenants, each a data space of its own
// sharing the project's definitions. Only Store is required; a nil part
// is left out of an export, and an archive that holds one cannot be
// imported into the Project.
type Project struct {
	Store     *eventstore.Store
	Projector *eventstore.Projector // the project's projection definitions
	Reactions *reactions.Engine     // the project's reaction definitions
	Tenants   *tenancy.Set          // the project's tenants
}

// Cursor is where an export of a Project goes on from: after feed
// position After of the project's own events (Tenant "") or of tenant
// Tenant's. Tenants are exported after the project's events, in id
// order. The zero Cursor is the start, which includes the definitions.
type Cursor struct {
	Tenant string
	After  int64
}

// String is the Cursor as ParseCursor reads it: "N", or "TENANT:N".
func (c Cursor) String() string {
	if c.Tenant == "" {
		return strconv.FormatInt(c.After, 10)
	}
	return c.Tenant + ":" + strconv.FormatInt(c.After, 10)
}

// ParseCursor reads a Cursor of the form String gives; a bad one wraps
// eventstore.ErrInvalid.
func ParseCursor(s string) (Cursor, error) {
	tenant, after, ok := strings.Cut(s, ":")
	if !ok {
		tenant, after = "", s
	}
	n, err := strconv.ParseInt(after, 10, 64)
	if err != nil || n < 0 || ok && tenant == "" {
		return Cursor{}, fmt.Errorf("cursor %q: want a feed position N (0 or more) or TENANT:N: %w", s, eventstore.ErrInvalid)
	}
	return Cursor{Tenant: tenant, After: n}, nil
}

// ExportProject writes p to w from the cursor from: at the zero cursor
// first its projection definitions (projections in Go excepted: their
// code is the program's) and reaction definitions, then the project's
// events (Export), then, for each live tenant in id order, a tenant
// record and the tenant's events. It returns the cursor to go on from,
// also with an error (see Export); an export resumed in the middle of a
// tenant writes that tenant's record again, which an import takes as a
// tenant that exists already.
func ExportProject(ctx context.Context, p Project, w *Writer, from Cursor) (Cursor, error) {
	if from == (Cursor{}) {
		if err := exportDefinitions(ctx, p, w); err != nil {
			return from, err
		}
	}
	cur := from
	if cur.Tenant == "" {
		next, err := Export(ctx, p.Store, w, cur.After)
		cur.After = next
		if err != nil {
			return cur, err
		}
	}
	if p.Tenants == nil {
		return cur, w.Flush()
	}
	tenants, err := p.Tenants.List(ctx)
	if err != nil {
		return cur, fmt.Errorf("archive: export tenants: %w", err)
	}
	slices.SortFunc(tenants, func(a, b tenancy.Tenant) int { return strings.Compare(a.ID, b.ID) })
	for _, t := range tenants {
		if t.Deleted || t.ID < from.Tenant {
			continue
		}
		after := int64(0)
		if t.ID == from.Tenant {
			after = from.After
		}
		if cur, err = ExportTenant(ctx, p.Tenants, t.ID, w, after); err != nil {
			return cur, err
		}
	}
	return cur, w.Flush()
}

// ExportTenant writes tenant id of tenants to w: its tenant record, then
// its events after feed position after (Export). It returns the cursor to
// go on from, also with an error (see Export). An unknown or deleted
// tenant is an error wrapping tenancy.ErrUnknownTenant.
func ExportTenant(ctx context.Context, tenants *tenancy.Set, id string, w *Writer, after int64) (Cursor, error) {
	cur := Cursor{Tenant: id, After: after}
	st, _, release, err := tenants.Open(ctx, id)
	if err != nil {
		return cur, fmt.Errorf("archive: export tenant %s: %w", id, err)
	}
	defer release()
	ref := ""
	if list, err := tenants.List(ctx); err == nil {
		for _, t := range list {
			if t.ID == id {
				ref = t.Reference
			}
		}
	}
	if err := w.WriteRecord(Record{Kind: KindTenant, Tenant: Tenant{ID: id, Reference: ref}}); err != nil {
		return cur, err
	}
	cur.After, err = Export(ctx, st, w, after)
	if err != nil {
		return cur, fmt.Errorf("archive: export tenant %s: %w", id, err)
	}
	return cur, nil
}

// exportDefinitions writes p's projection and reaction definitions.
func exportDefinitions(ctx context.Context, p Project, w *Writer) error {
	if p.Projector != nil {
		defs, err := p.Projector.Definitions(ctx)
		if err != nil {
			return fmt.Errorf("archive: export projection definitions: %w", err)
		}
		for _, d := range defs {
			if d.Code != nil {
				continue
			}
			b, err := json.Marshal(d)
			if err != nil {
				return fmt.Errorf("archive: export projection %s: %w", d.Name, err)
			}
			if err := w.WriteRecord(Record{Kind: KindProjection, Projection: b, SigningSecret: d.SigningSecret}); err != nil {
				return err
			}
		}
	}
	if p.Reactions != nil {
		defs, err := p.Reactions.Definitions(ctx)
		if err != nil {
			return fmt.Errorf("archive: export reaction definitions: %w", err)
		}
		for _, d := range defs {
			b, err := json.Marshal(d)
			if err != nil {
				return fmt.Errorf("archive: export reaction %s: %w", d.Name, err)
			}
			if err := w.WriteRecord(Record{Kind: KindReaction, Reaction: b}); err != nil {
				return err
			}
		}
	}
	return nil
}

// ImportProject reads r into p: batches as Import does, into the
// project's Store until a tenant record and into that tenant's after it
// (added to p.Tenants when missing, with its reference); projection
// definitions with Projector.Put as they come, so that p's projectors
// build them from the imported events; reaction definitions with
// reactions' Put once every batch is imported, so that they start at the
// feeds' heads and the imported events, whose reactions ran at the
// source, schedule none. A record p has no part for (a tenant without
// Tenants, a definition without Projector or Reactions) stops the import
// with an error naming the line that wraps eventstore.ErrInvalid; other
// errors are those of Import. Stats count the batches of every data
// space.
func ImportProject(ctx context.Context, p Project, r *Reader) (Stats, error) {
	var stats Stats
	var pending []reactions.Definition // reaction definitions, put at the end
	im := &importer{st: p.Store}
	release := func() {}
	defer func() { release() }()
	done := func() error { // the data space's batches are all read
		err := im.flush(ctx, true)
		stats.Batches += im.stats.Batches
		stats.Events += im.stats.Events
		stats.Duplicates += im.stats.Duplicates
		im.stats = Stats{}
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return stats, errors.Join(done(), fmt.Errorf("archive: import: %w", err))
		}
		b, rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			if ferr := done(); ferr != nil {
				return stats, ferr
			}
			return stats, fmt.Errorf("archive: import: %w", err)
		}
		if b != nil {
			if err := im.add(ctx, *b, r.Line()); err != nil {
				return stats, errors.Join(done(), err)
			}
			continue
		}
		if err := done(); err != nil {
			return stats, err
		}
		missing := func(part string) error {
			return fmt.Errorf("archive: import: line %d: a %s record, and the target takes no %ss: %w", r.Line(), rec.Kind, part, eventstore.ErrInvalid)
		}
		switch rec.Kind {
		case KindProjection:
			if p.Projector == nil {
				return stats, missing("projection definition")
			}
			var d eventstore.Definition
			if err := json.Unmarshal(rec.Projection, &d); err != nil {
				return stats, fmt.Errorf("archive: import: line %d: projection definition: %v: %w", r.Line(), err, eventstore.ErrInvalid)
			}
			d.SigningSecret = rec.SigningSecret
			if _, err := p.Projector.Put(ctx, d); err != nil {
				return stats, fmt.Errorf("archive: import: line %d: %w", r.Line(), err)
			}
		case KindReaction:
			if p.Reactions == nil {
				return stats, missing("reaction definition")
			}
			var d reactions.Definition
			if err := json.Unmarshal(rec.Reaction, &d); err != nil {
				return stats, fmt.Errorf("archive: import: line %d: reaction definition: %v: %w", r.Line(), err, eventstore.ErrInvalid)
			}
			if len(pending) >= maxPendingReactions {
				return stats, fmt.Errorf("archive: import: line %d: more than %d reaction definitions: %w", r.Line(), maxPendingReactions, eventstore.ErrInvalid)
			}
			pending = append(pending, d)
		case KindTenant:
			if p.Tenants == nil {
				return stats, missing("tenant")
			}
			release()
			release = func() {}
			if _, err := p.Tenants.Add(ctx, rec.Tenant.ID, rec.Tenant.Reference); err != nil {
				return stats, fmt.Errorf("archive: import: line %d: tenant %s: %w", r.Line(), rec.Tenant.ID, err)
			}
			st, _, rel, err := p.Tenants.Open(ctx, rec.Tenant.ID)
			if err != nil {
				return stats, fmt.Errorf("archive: import: line %d: tenant %s: %w", r.Line(), rec.Tenant.ID, err)
			}
			release = rel
			im = &importer{st: st}
		}
	}
	if err := done(); err != nil {
		return stats, err
	}
	for _, d := range pending {
		if _, err := p.Reactions.Put(ctx, d); err != nil {
			return stats, fmt.Errorf("archive: import: reaction definition %s: %w", d.Name, err)
		}
	}
	return stats, nil
}

// maxPendingReactions bounds the reaction definitions ImportProject holds
// until the end (an Engine takes far fewer).
const maxPendingReactions = 10_000

// VerifyProject checks that a and b hold the same: the same events
// (Verify) in the projects' Stores and in every live tenant's, the same
// tenants (ids and references), and the same projection and reaction
// definitions (their JSON forms), of the parts both have. The first
// difference wraps ErrDifferent.
func VerifyProject(ctx context.Context, a, b Project) error {
	if err := Verify(ctx, a.Store, b.Store); err != nil {
		return err
	}
	if a.Projector != nil && b.Projector != nil {
		if err := sameDefinitions(ctx, "projection", a.Projector.Definitions, b.Projector.Definitions); err != nil {
			return err
		}
	}
	if a.Reactions != nil && b.Reactions != nil {
		if err := sameDefinitions(ctx, "reaction", a.Reactions.Definitions, b.Reactions.Definitions); err != nil {
			return err
		}
	}
	if a.Tenants == nil || b.Tenants == nil {
		return nil
	}
	ta, err := liveTenants(ctx, a.Tenants)
	if err != nil {
		return err
	}
	tb, err := liveTenants(ctx, b.Tenants)
	if err != nil {
		return err
	}
	if !slices.Equal(ta, tb) {
		return fmt.Errorf("archive: verify: the tenants differ: %v against %v: %w", ta, tb, ErrDifferent)
	}
	for _, t := range ta {
		if err := verifyTenant(ctx, a.Tenants, b.Tenants, t.ID); err != nil {
			return err
		}
	}
	return nil
}

func verifyTenant(ctx context.Context, a, b *tenancy.Set, id string) error {
	sa, _, ra, err := a.Open(ctx, id)
	if err != nil {
		return fmt.Errorf("archive: verify: tenant %s: %w", id, err)
	}
	defer ra()
	sb, _, rb, err := b.Open(ctx, id)
	if err != nil {
		return fmt.Errorf("archive: verify: tenant %s: %w", id, err)
	}
	defer rb()
	if err := Verify(ctx, sa, sb); err != nil {
		return fmt.Errorf("tenant %s: %w", id, err)
	}
	return nil
}

// liveTenants returns the live tenants of s in id order.
func liveTenants(ctx context.Context, s *tenancy.Set) ([]Tenant, error) {
	all, err := s.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("archive: verify: %w", err)
	}
	var out []Tenant
	for _, t := range all {
		if !t.Deleted {
			out = append(out, Tenant{ID: t.ID, Reference: t.Reference})
		}
	}
	slices.SortFunc(out, func(x, y Tenant) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
}

// sameDefinitions compares the definitions two lists return, by their
// JSON forms.
func sameDefinitions[D any](ctx context.Context, what string, a, b func(context.Context) ([]D, error)) error {
	forms := func(list func(context.Context) ([]D, error)) ([]string, error) {
		defs, err := list(ctx)
		if err != nil {
			return nil, fmt.Errorf("archive: verify: %s definitions: %w", what, err)
		}
		out := make([]string, len(defs))
		for i, d := range defs {
			j, err := json.Marshal(d)
			if err != nil {
				return nil, fmt.Errorf("archive: verify: %s definitions: %w", what, err)
			}
			out[i] = string(j)
		}
		slices.Sort(out)
		return out, nil
	}
	fa, err := forms(a)
	if err != nil {
		return err
	}
	fb, err := forms(b)
	if err != nil {
		return err
	}
	if !slices.Equal(fa, fb) {
		return fmt.Errorf("archive: verify: the %s definitions differ (%d against %d): %w", what, len(fa), len(fb), ErrDifferent)
	}
	return nil
}
