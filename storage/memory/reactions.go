package memory

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

var _ storage.ReactionStorage = (*store)(nil)

// reactionStore holds reaction definitions and reactions. Its mutex is
// never held while taking store.mu, nor the other way round.
type reactionStore struct {
	mu   sync.Mutex
	defs map[string]*storage.ReactionDefinitionRecord
	byID map[string]*memReaction
	due  dueHeap // the pending and ongoing reactions, by DueAt
}

// memReaction is a stored reaction and its place in the due heap (-1
// when it is not active).
type memReaction struct {
	r   storage.Reaction
	idx int
}

// dueHeap orders active reactions by DueAt, then ID.
type dueHeap []*memReaction

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if c := h[i].r.DueAt.Compare(h[j].r.DueAt); c != 0 {
		return c < 0
	}
	return h[i].r.ID < h[j].r.ID
}
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *dueHeap) Push(x any) {
	m := x.(*memReaction)
	m.idx = len(*h)
	*h = append(*h, m)
}
func (h *dueHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	m.idx = -1
	return m
}

// lockRx checks that the store is open and ctx alive, then locks the
// reactions; the caller unlocks rx.mu.
func (s *store) lockRx(ctx context.Context, op string) (*reactionStore, error) {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return nil, fmt.Errorf("memory: %s: %w", op, storage.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rx := &s.rx
	rx.mu.Lock()
	if rx.defs == nil {
		rx.defs = make(map[string]*storage.ReactionDefinitionRecord)
		rx.byID = make(map[string]*memReaction)
	}
	return rx, nil
}

// setState moves m to state st with DueAt due, keeping the heap right.
func (rx *reactionStore) setState(m *memReaction, st storage.ReactionState, due time.Time) {
	m.r.State, m.r.DueAt = st, due
	active := st == storage.ReactionPending || st == storage.ReactionOngoing
	switch {
	case active && m.idx >= 0:
		heap.Fix(&rx.due, m.idx)
	case active:
		heap.Push(&rx.due, m)
	case m.idx >= 0:
		heap.Remove(&rx.due, m.idx)
	}
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

// CreateReactionDefinition implements storage.ReactionStorage.
func (s *store) CreateReactionDefinition(ctx context.Context, def storage.ReactionDefinitionRecord) error {
	rx, err := s.lockRx(ctx, "create reaction definition")
	if err != nil {
		return err
	}
	defer rx.mu.Unlock()
	if _, ok := rx.defs[def.Name]; ok {
		return fmt.Errorf("reaction definition %q exists: %w", def.Name, storage.ErrConflict)
	}
	def.Spec = slices.Clone(def.Spec)
	def.CreatedAt = utc(def.CreatedAt)
	rx.defs[def.Name] = &def
	return nil
}

// UpdateReactionDefinition implements storage.ReactionStorage.
func (s *store) UpdateReactionDefinition(ctx context.Context, name string, spec []byte, checkpoint int64) error {
	rx, err := s.lockRx(ctx, "update reaction definition")
	if err != nil {
		return err
	}
	defer rx.mu.Unlock()
	d, ok := rx.defs[name]
	if !ok {
		return fmt.Errorf("reaction definition %q: %w", name, storage.ErrNotFound)
	}
	d.Spec = slices.Clone(spec)
	if checkpoint >= 0 {
		d.Checkpoint = checkpoint
	}
	return nil
}

// ReactionDefinition implements storage.ReactionStorage.
func (s *store) ReactionDefinition(ctx context.Context, name string) (storage.ReactionDefinitionRecord, error) {
	rx, err := s.lockRx(ctx, "reaction definition")
	if err != nil {
		return storage.ReactionDefinitionRecord{}, err
	}
	defer rx.mu.Unlock()
	d, ok := rx.defs[name]
	if !ok {
		return storage.ReactionDefinitionRecord{}, fmt.Errorf("reaction definition %q: %w", name, storage.ErrNotFound)
	}
	c := *d
	c.Spec = slices.Clone(d.Spec)
	return c, nil
}

// ReactionDefinitions implements storage.ReactionStorage.
func (s *store) ReactionDefinitions(ctx context.Context) ([]storage.ReactionDefinitionRecord, error) {
	rx, err := s.lockRx(ctx, "reaction definitions")
	if err != nil {
		return nil, err
	}
	defer rx.mu.Unlock()
	out := make([]storage.ReactionDefinitionRecord, 0, len(rx.defs))
	for _, d := range rx.defs {
		c := *d
		c.Spec = slices.Clone(d.Spec)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b storage.ReactionDefinitionRecord) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteReactionDefinition implements storage.ReactionStorage.
func (s *store) DeleteReactionDefinition(ctx context.Context, name string, at time.Time) error {
	rx, err := s.lockRx(ctx, "delete reaction definition")
	if err != nil {
		return err
	}
	defer rx.mu.Unlock()
	if _, ok := rx.defs[name]; !ok {
		return fmt.Errorf("reaction definition %q: %w", name, storage.ErrNotFound)
	}
	delete(rx.defs, name)
	for _, m := range rx.byID {
		if m.r.Definition == name && m.r.State == storage.ReactionPending {
			m.r.FinishedAt = utc(at)
			rx.setState(m, storage.ReactionCanceled, m.r.DueAt)
		}
	}
	return nil
}

// ScheduleReactions implements storage.ReactionStorage.
func (s *store) ScheduleReactions(ctx context.Context, sc storage.ReactionSchedule) error {
	rx, err := s.lockRx(ctx, "schedule reactions")
	if err != nil {
		return err
	}
	defer rx.mu.Unlock()
	d, ok := rx.defs[sc.Definition]
	if !ok {
		return fmt.Errorf("reaction definition %q: %w", sc.Definition, storage.ErrNotFound)
	}
	if d.Checkpoint != sc.From || string(d.Spec) != string(sc.Spec) {
		return fmt.Errorf("reaction definition %q moved on: %w", sc.Definition, storage.ErrConflict)
	}
	for _, r := range sc.Insert {
		if _, ok := rx.byID[r.ID]; ok {
			return fmt.Errorf("reaction %s exists: %w", r.ID, storage.ErrConflict)
		}
	}
	if len(sc.Cancel) > 0 {
		cancel := make(map[string]bool, len(sc.Cancel))
		for _, id := range sc.Cancel {
			cancel[id] = true
		}
		for _, m := range rx.byID {
			if m.r.Definition == sc.Definition && m.r.State == storage.ReactionPending && cancel[m.r.AggregateID] {
				m.r.FinishedAt = utc(sc.At)
				rx.setState(m, storage.ReactionCanceled, m.r.DueAt)
			}
		}
	}
	for _, r := range sc.Insert {
		m := &memReaction{r: r, idx: -1}
		m.r.Payload = slices.Clone(r.Payload)
		m.r.CreatedAt, m.r.TriggerAt, m.r.FinishedAt = utc(r.CreatedAt), utc(r.TriggerAt), utc(r.FinishedAt)
		rx.byID[r.ID] = m
		rx.setState(m, r.State, utc(r.DueAt))
	}
	d.Checkpoint = sc.To
	return nil
}

// ClaimReactions implements storage.ReactionStorage.
func (s *store) ClaimReactions(ctx context.Context, c storage.ReactionClaim) ([]storage.Reaction, error) {
	rx, err := s.lockRx(ctx, "claim reactions")
	if err != nil {
		return nil, err
	}
	defer rx.mu.Unlock()
	now, until := utc(c.Now), utc(c.Until)
	var out []storage.Reaction
	for len(out) < c.Limit && rx.due.Len() > 0 && !rx.due[0].r.DueAt.After(now) {
		m := rx.due[0]
		m.r.Claim = c.Claim
		m.r.Attempts++
		rx.setState(m, storage.ReactionOngoing, until)
		r := m.r
		r.Payload = slices.Clone(m.r.Payload)
		out = append(out, r)
	}
	return out, nil
}

// FinishReactions implements storage.ReactionStorage.
func (s *store) FinishReactions(ctx context.Context, outcomes []storage.ReactionOutcome) ([]error, error) {
	rx, err := s.lockRx(ctx, "finish reactions")
	if err != nil {
		return nil, err
	}
	defer rx.mu.Unlock()
	errs := make([]error, len(outcomes))
	for i, o := range outcomes {
		m, ok := rx.byID[o.ID]
		switch {
		case !ok:
			errs[i] = fmt.Errorf("reaction %s: %w", o.ID, storage.ErrNotFound)
		case m.r.State != storage.ReactionOngoing || m.r.Claim != o.Claim:
			errs[i] = fmt.Errorf("reaction %s is no longer claimed by this attempt: %w", o.ID, storage.ErrConflict)
		case o.State == storage.ReactionPending:
			m.r.LastError, m.r.Claim = o.Error, ""
			rx.setState(m, o.State, utc(o.DueAt))
		default:
			m.r.LastError, m.r.Claim, m.r.FinishedAt = o.Error, "", utc(o.At)
			rx.setState(m, o.State, m.r.DueAt)
		}
	}
	return errs, nil
}

// Reaction implements storage.ReactionStorage.
func (s *store) Reaction(ctx context.Context, id string) (storage.Reaction, error) {
	rx, err := s.lockRx(ctx, "reaction")
	if err != nil {
		return storage.Reaction{}, err
	}
	defer rx.mu.Unlock()
	m, ok := rx.byID[id]
	if !ok {
		return storage.Reaction{}, fmt.Errorf("reaction %s: %w", id, storage.ErrNotFound)
	}
	r := m.r
	r.Payload = slices.Clone(m.r.Payload)
	return r, nil
}

// ListReactions implements storage.ReactionStorage by scanning.
func (s *store) ListReactions(ctx context.Context, q storage.ReactionQuery) (storage.ReactionList, error) {
	rx, err := s.lockRx(ctx, "list reactions")
	if err != nil {
		return storage.ReactionList{}, err
	}
	defer rx.mu.Unlock()
	var all []storage.Reaction
	for _, m := range rx.byID {
		if q.Matches(&m.r) {
			r := m.r
			r.Payload = nil
			all = append(all, r)
		}
	}
	slices.SortFunc(all, func(a, b storage.Reaction) int {
		if c := a.TriggerAt.Compare(b.TriggerAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	list := storage.ReactionList{Total: int64(len(all)), Reactions: []storage.Reaction{}}
	if q.Skip < len(all) {
		all = all[q.Skip:]
		list.Reactions = all[:min(len(all), max(q.Limit, 0))]
	}
	return list, nil
}

// CancelReaction implements storage.ReactionStorage.
func (s *store) CancelReaction(ctx context.Context, id string, at time.Time) error {
	rx, err := s.lockRx(ctx, "cancel reaction")
	if err != nil {
		return err
	}
	defer rx.mu.Unlock()
	m, ok := rx.byID[id]
	if !ok {
		return fmt.Errorf("reaction %s: %w", id, storage.ErrNotFound)
	}
	if m.r.State != storage.ReactionPending {
		return fmt.Errorf("reaction %s is not pending: %w", id, storage.ErrConflict)
	}
	m.r.FinishedAt = utc(at)
	rx.setState(m, storage.ReactionCanceled, m.r.DueAt)
	return nil
}

// ExecuteReaction implements storage.ReactionStorage.
func (s *store) ExecuteReaction(ctx context.Context, id string, now time.Time) error {
	rx, err := s.lockRx(ctx, "execute reaction")
	if err != nil {
		return err
	}
	defer rx.mu.Unlock()
	m, ok := rx.byID[id]
	if !ok {
		return fmt.Errorf("reaction %s: %w", id, storage.ErrNotFound)
	}
	now = utc(now)
	if m.r.State == storage.ReactionOngoing && m.r.DueAt.After(now) {
		return fmt.Errorf("reaction %s is being attempted: %w", id, storage.ErrConflict)
	}
	m.r.Attempts, m.r.FinishedAt, m.r.Claim, m.r.LastError = 0, time.Time{}, "", ""
	rx.setState(m, storage.ReactionPending, now)
	return nil
}

// DeleteAggregateReactions implements storage.ReactionStorage.
func (s *store) DeleteAggregateReactions(ctx context.Context, aggregateType, aggregateID string) error {
	rx, err := s.lockRx(ctx, "delete aggregate reactions")
	if err != nil {
		return err
	}
	defer rx.mu.Unlock()
	for id, m := range rx.byID {
		if m.r.AggregateType == aggregateType && (aggregateID == "" || m.r.AggregateID == aggregateID) {
			if m.idx >= 0 {
				heap.Remove(&rx.due, m.idx)
			}
			delete(rx.byID, id)
		}
	}
	return nil
}

// NextReactionDue implements storage.ReactionStorage.
func (s *store) NextReactionDue(ctx context.Context) (time.Time, bool, error) {
	rx, err := s.lockRx(ctx, "next reaction due")
	if err != nil {
		return time.Time{}, false, err
	}
	defer rx.mu.Unlock()
	if rx.due.Len() == 0 {
		return time.Time{}, false, nil
	}
	return rx.due[0].r.DueAt, true, nil
}
