package reactions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/hooks"
	"github.com/eventkit-go/eventstore/internal/tracing"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
	"github.com/tidwall/gjson"
)

// Run schedules and delivers reactions until ctx is done, then returns nil
// once the attempts in flight have ended. It follows the feed of every
// definition (woken by saves through the Store, by other processes' saves
// as the Store learns of them, and every Options.PollInterval), and
// attempts the reactions that are due, at most Options.Concurrency at
// once. Several processes may run it on one database: each event schedules
// once and each reaction is attempted by one process at a time.
func (e *Engine) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { e.watch(ctx) })
	wg.Go(func() { e.scheduleLoop(ctx) })
	wg.Go(func() { e.deliverLoop(ctx) })
	wg.Wait()
	return nil
}

// watch wakes the scheduler when events are saved. It waits on the
// Store's own notifications of appends (ReadFeed with a Wait, reading the
// feed again every PollInterval when nothing reports saves), and after
// each wake-up lets schedulePace pass and reads the feed's head, so that
// a client saving thousands of events a second wakes the scheduler at
// most once per schedulePace instead of once per save.
func (e *Engine) watch(ctx context.Context) {
	after := int64(-1)
	for ctx.Err() == nil {
		if after < 0 {
			h, err := e.st.FeedHead(ctx, "")
			if err != nil {
				sleep(ctx, e.poll)
				continue
			}
			after = h
			// Events saved before this head but after the scheduling
			// round Run began with would otherwise wait for the poll.
			wake(e.wakeSched)
		}
		// While saves keep coming the head tells, at the cost of one
		// index read; ReadFeed, which reads a page of events, is only
		// for waiting.
		if h, err := e.st.FeedHead(ctx, ""); err == nil && h > after {
			after = h
			wake(e.wakeSched)
			sleep(ctx, e.pace(schedulePace))
			continue
		}
		opts := &eventstore.FeedOptions{Limit: 1, Wait: 30 * time.Second}
		*hooks.FeedPoll(opts) = e.poll
		res, err := e.st.ReadFeed(ctx, "", after, opts)
		switch {
		case err != nil:
			sleep(ctx, e.poll)
		case len(res.Entries) > 0:
			after = max(res.Head, res.Next)
			wake(e.wakeSched)
			sleep(ctx, e.pace(schedulePace))
		default:
			after = max(after, res.Next)
		}
	}
}

// Pacing of Run. Each bounds how often Run writes to the storage while
// work keeps coming, which is what a client saving at the same time pays
// for (on SQLite every write commits on the one write connection, with an
// fsync): deliveries and scheduling gather work over these intervals and
// write it in one transaction.
const (
	// schedulePace is the least time between two scheduling rounds woken
	// by saves: the most a reaction due at once waits to be scheduled.
	schedulePace = 50 * time.Millisecond
	// claimPace is the least time between two claims that found less
	// than they could take (between claims that fill every free slot
	// there is none): the most a reaction waits after it fell due while
	// slots are free.
	claimPace = 50 * time.Millisecond
	// recordPace is how long outcomes of attempts are gathered before
	// they are recorded together.
	recordPace = 50 * time.Millisecond
	// checkpointEvery is how often a definition's checkpoint is written
	// while the events it reads schedule nothing (see scheduleDef).
	checkpointEvery = time.Second
)

// pace returns d, or the poll interval when that is shorter (tests poll
// every few milliseconds and need no pacing).
func (e *Engine) pace(d time.Duration) time.Duration { return min(d, e.poll) }

// sleep waits for d or ctx.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// scheduleLoop schedules the reactions of new events, at most once per
// schedulePace while saves keep waking it.
func (e *Engine) scheduleLoop(ctx context.Context) {
	t := time.NewTicker(e.poll)
	defer t.Stop()
	for ctx.Err() == nil {
		started := time.Now()
		if err := e.schedule(ctx, false); err != nil && ctx.Err() == nil {
			e.log.Warn("reactions: scheduling failed, retrying", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-e.wakeSched:
			sleep(ctx, e.pace(schedulePace)-time.Since(started))
		case <-t.C:
		}
	}
}

// ScheduleOnce schedules the reactions of every event saved since the last
// call (or since each definition was created), then returns. Run calls it;
// tests may call it to schedule without running.
func (e *Engine) ScheduleOnce(ctx context.Context) error {
	return e.schedule(ctx, true)
}

// schedule is ScheduleOnce; flush writes every checkpoint that moved,
// else scheduleDef writes one that moves over nothing to schedule only
// every checkpointEvery.
//
// Rounds woken by saves use the definitions read at most specTTL ago (a
// change by another process reaches scheduling within it, as it reaches
// deliveries); a change through this Engine, a flush or a conflict reads
// them again.
func (e *Engine) schedule(ctx context.Context, flush bool) error {
	e.mu.Lock()
	recs, fresh := slices.Clone(e.schedDefs), time.Since(e.schedDefsRead) < specTTL
	e.mu.Unlock()
	if flush || !fresh {
		read := time.Now()
		var err error
		if recs, err = e.rs.ReactionDefinitions(ctx); err != nil {
			return err
		}
		e.mu.Lock()
		e.schedDefs, e.schedDefsRead = slices.Clone(recs), read
		e.mu.Unlock()
	}
	var errs []error
	for i := range recs {
		if err := e.scheduleDef(ctx, &recs[i], flush); err != nil {
			e.forgetDefinitions()
			// A conflict: another process moved on, or the definition
			// changed or went; the next round reads it again.
			if !errors.Is(err, eventstore.ErrConflict) && !errors.Is(err, eventstore.ErrNotFound) {
				errs = append(errs, fmt.Errorf("definition %s: %w", recs[i].Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// forgetDefinitions makes the next scheduling round read the
// definitions.
func (e *Engine) forgetDefinitions() {
	e.mu.Lock()
	e.schedDefs, e.schedDefsRead = nil, time.Time{}
	e.mu.Unlock()
}

// noteCheckpoint records in the definitions scheduling rounds use that
// this Engine moved the checkpoint of definition name from from to to.
func (e *Engine) noteCheckpoint(name string, from, to int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.schedDefs {
		if d := &e.schedDefs[i]; d.Name == name && d.Checkpoint == from {
			d.Checkpoint = to
		}
	}
}

// compiledOf returns the compiled form of a stored definition, cached by
// spec.
func (e *Engine) compiledOf(spec []byte) (*compiled, error) {
	e.mu.Lock()
	c, ok := e.defs[string(spec)]
	e.mu.Unlock()
	if ok {
		return c, nil
	}
	var d Definition
	if err := json.Unmarshal(spec, &d); err != nil {
		return nil, fmt.Errorf("stored spec: %v", err)
	}
	c, err := compile(d, "load reaction definition", nil)
	if err != nil {
		return nil, err
	}
	c.spec = spec
	e.mu.Lock()
	if len(e.defs) > 4*e.maxDefs {
		clear(e.defs)
	}
	e.defs[string(spec)] = c
	e.mu.Unlock()
	return c, nil
}

// scanned is how far the scheduler of this Engine read a definition's
// feed past its stored checkpoint without finding anything to schedule.
type scanned struct {
	spec    string    // the definition's spec when it read
	stored  int64     // the checkpoint stored then
	through int64     // the FeedSequence read through
	written time.Time // when this Engine last wrote the checkpoint
}

// scheduleDef schedules the events of one definition's feed after its
// checkpoint, a page at a time, each page committed with a compare-and-set
// on the checkpoint. A page that schedules and cancels nothing is not
// written: the Engine remembers how far it read (see scanned) and moves
// the stored checkpoint over it with the next page that schedules
// something, or after checkpointEvery (at once when flush). Skipping is
// safe because planning is a function of the events and the spec: another
// process reading those events from the stored checkpoint finds nothing
// either, and its compare-and-set makes this one start over from its
// checkpoint. So a client saving events the definition ignores costs the
// storage no write per save; a restart reads again at most
// checkpointEvery of the feed.
func (e *Engine) scheduleDef(ctx context.Context, rec *storage.ReactionDefinitionRecord, flush bool) error {
	c, err := e.compiledOf(rec.Spec)
	if err != nil {
		return err
	}
	e.mu.Lock()
	sn, ok := e.scanned[rec.Name]
	e.mu.Unlock()
	if !ok || sn.spec != string(rec.Spec) || sn.stored != rec.Checkpoint || sn.through < rec.Checkpoint {
		sn = scanned{spec: string(rec.Spec), stored: rec.Checkpoint, through: rec.Checkpoint, written: sn.written}
	}
	defer func() {
		e.mu.Lock()
		if len(e.scanned) > 2*e.maxDefs {
			clear(e.scanned)
		}
		e.scanned[rec.Name] = sn
		e.mu.Unlock()
	}()
	for {
		res, err := e.st.ReadFeed(ctx, c.def.FeedName, sn.through, &eventstore.FeedOptions{Limit: 200})
		if errors.Is(err, eventstore.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var sc storage.ReactionSchedule
		if res.Next > sn.through {
			sc = e.plan(c, res.Entries)
			sn.through = res.Next
		}
		last := !res.HasMore || len(res.Entries) == 0
		due := time.Since(sn.written) >= checkpointEvery || flush && last
		if sn.through > sn.stored && (len(sc.Insert) > 0 || len(sc.Cancel) > 0 || due) {
			sc.Definition, sc.Spec, sc.From, sc.To = rec.Name, rec.Spec, sn.stored, sn.through
			if err := e.rs.ScheduleReactions(ctx, sc); err != nil {
				sn.stored = -1 // read the stored checkpoint again
				return err
			}
			if len(sc.Insert) > 0 {
				wake(e.wakeDeliver)
			}
			e.noteCheckpoint(rec.Name, sn.stored, sn.through)
			sn.stored, sn.written = sn.through, time.Now()
			rec.Checkpoint = sn.stored
		}
		if last {
			return nil
		}
	}
}

// plan turns a page of the feed into reactions to insert and aggregates
// whose pending reactions are cancelled. A cancelling event cancels the
// reactions scheduled before it, in this page (inserted as cancelled) and
// stored (ReactionSchedule.Cancel); those scheduled after it stay.
func (e *Engine) plan(c *compiled, entries []eventstore.FeedEntry) storage.ReactionSchedule {
	now := e.now().UTC()
	var sc storage.ReactionSchedule
	sc.At = now
	pending := make(map[string][]int) // aggregate id -> indexes into Insert
	cancelled := make(map[string]bool)
	for _, entry := range entries {
		for i := range entry.Events {
			ev := &entry.Events[i]
			switch {
			case ev.Type == c.def.ReactOnEventType:
				r := e.newReaction(c, ev, entry.Cursor, now)
				if r.State == storage.ReactionPending {
					pending[ev.AggregateID] = append(pending[ev.AggregateID], len(sc.Insert))
				}
				sc.Insert = append(sc.Insert, r)
			case c.cancel[ev.Type]:
				for _, j := range pending[ev.AggregateID] {
					sc.Insert[j].State, sc.Insert[j].FinishedAt = storage.ReactionCanceled, now
				}
				delete(pending, ev.AggregateID)
				if !cancelled[ev.AggregateID] {
					cancelled[ev.AggregateID] = true
					sc.Cancel = append(sc.Cancel, ev.AggregateID)
				}
			}
		}
	}
	return sc
}

// newReaction builds the reaction ev schedules: pending at its trigger
// time, or failed when that cannot be found or the event is too large.
func (e *Engine) newReaction(c *compiled, ev *eventstore.Event, seq int64, now time.Time) storage.Reaction {
	r := storage.Reaction{ID: uuid.NewString(), Definition: c.def.Name, AggregateType: ev.AggregateType,
		AggregateID: ev.AggregateID, EventID: ev.ID, EventType: ev.Type, State: storage.ReactionPending,
		CreatedAt: now}
	at, err := c.trigger(ev)
	if err == nil {
		r.TriggerAt, r.DueAt = at, at
		r.Payload, err = payload(&r, ev, seq, e.opts.Tenant)
	}
	if err != nil {
		r.State, r.FinishedAt, r.LastError, r.Payload = storage.ReactionFailed, now, err.Error(), nil
		if r.TriggerAt.IsZero() {
			r.TriggerAt = ev.RecordedAt
		}
		r.DueAt = r.TriggerAt
		e.log.Warn("reactions: event cannot be scheduled", "definition", c.def.Name, "eventId", ev.ID, "err", err)
	}
	return r
}

// trigger returns when the reaction of ev is due.
func (c *compiled) trigger(ev *eventstore.Event) (time.Time, error) {
	base := ev.RecordedAt
	if c.path != nil {
		keys := make([]string, len(c.path))
		for i, k := range c.path {
			keys[i] = gjson.Escape(k)
		}
		v := gjson.GetBytes(ev.Data, strings.Join(keys, "."))
		t, err := timeValue(v)
		if err != nil {
			return time.Time{}, fmt.Errorf("triggerTimeField %s: %v", c.def.TriggerTimeField, err)
		}
		base = t
	}
	at := base.Add(c.offset)
	if at.Year() < 1 || at.Year() > 9999 {
		return time.Time{}, fmt.Errorf("the trigger time %v is outside the years 1 to 9999", at)
	}
	return at.UTC().Truncate(time.Microsecond), nil
}

// timeValue reads epoch milliseconds, an RFC 3339 date-time or a date.
func timeValue(v gjson.Result) (time.Time, error) {
	switch v.Type {
	case gjson.Number:
		ms, err := strconv.ParseFloat(v.Raw, 64)
		if err != nil || ms < -62135596800000 || ms > 253402300799999 {
			return time.Time{}, fmt.Errorf("%s is not milliseconds since the epoch within the years 1 to 9999", clip(v.Raw))
		}
		return time.UnixMilli(int64(ms)).UTC(), nil
	case gjson.String:
		if t, err := time.Parse(time.RFC3339Nano, v.Str); err == nil {
			return t, nil
		}
		if t, err := time.Parse(time.DateOnly, v.Str); err == nil {
			return t, nil
		}
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 date-time or date", clip(v.Str))
	case gjson.Null:
		if !v.Exists() {
			return time.Time{}, errors.New("the event has no such field")
		}
	}
	return time.Time{}, errors.New("holds neither a number of milliseconds nor a date")
}

// body is what an action receives.
type body struct {
	Metadata metadata  `json:"metadata"`
	Event    eventBody `json:"event"`
}

type metadata struct {
	ReactionID       string `json:"reactionId"`
	ReactionName     string `json:"reactionName"`
	TenantID         string `json:"tenantId,omitempty"`
	AggregateID      string `json:"aggregateId"`
	AggregateType    string `json:"aggregateType"`
	FeedName         string `json:"feedName"`
	Timestamp        int64  `json:"timestamp"`
	SequenceNumber   int64  `json:"sequenceNumber"`
	AggregateVersion int64  `json:"aggregateVersion"`
	TriggerAt        int64  `json:"triggerAt"`
	// Traceparent and Tracestate are the W3C trace context of the save
	// that stored the event, when it was traced.
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`
}

type eventBody struct {
	EventID       string          `json:"eventId"`
	EventType     string          `json:"eventType"`
	Data          json.RawMessage `json:"data,omitempty"`
	EncryptedData string          `json:"encryptedData,omitempty"`
	// Metadata is the event's own metadata in the shape the HTTP API
	// gives it (correlationId, causationId and the caller's keys, see
	// storage.AppendMetadata), as an external function's call carries it;
	// omitted when the event has none.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// payload encodes the body of r's deliveries; tenant, when not empty, is
// the tenant the Engine serves.
func payload(r *storage.Reaction, ev *eventstore.Event, seq int64, tenant string) ([]byte, error) {
	b, err := json.Marshal(body{
		Metadata: metadata{ReactionID: r.ID, ReactionName: r.Definition, TenantID: tenant, AggregateID: ev.AggregateID,
			AggregateType: ev.AggregateType, FeedName: ev.AggregateType, Timestamp: ev.RecordedAt.UnixMilli(),
			SequenceNumber: seq, AggregateVersion: ev.Version, TriggerAt: r.TriggerAt.UnixMilli(),
			Traceparent: ev.Metadata.Values[tracing.TraceparentKey], Tracestate: ev.Metadata.Values[tracing.TracestateKey]},
		Event: eventBody{EventID: ev.ID, EventType: ev.Type, Data: ev.Data, EncryptedData: ev.EncryptedData,
			Metadata: storage.AppendMetadata(nil, ev.Metadata)},
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the event: %v", err)
	}
	if len(b) > storage.MaxReactionPayload {
		return nil, fmt.Errorf("the event is larger than %d bytes, the most a reaction sends", storage.MaxReactionPayload)
	}
	return b, nil
}
