package reactions

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/tracing"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/propagation"
)

// maxBackoff caps the delay between two attempts.
const maxBackoff = 24 * time.Hour

// budget bounds the deliveries of a group of Engines: one made with New
// and those made from it with ForTenant, so that Options.Concurrency
// bounds the attempts of the process, not of each tenant. held holds a
// token for every reaction claimed and not yet recorded (at most twice
// the concurrency: a claimed reaction waits in the process for a free slot
// for at most about one Timeout, well within its lease), slots one for
// every attempt in progress.
type budget struct {
	held, slots chan struct{}

	mu    sync.Mutex
	freed chan struct{} // closed when tokens are given back, then replaced
}

func newBudget(concurrency int) *budget {
	return &budget{held: make(chan struct{}, 2*concurrency), slots: make(chan struct{}, concurrency),
		freed: make(chan struct{})}
}

// take takes up to n tokens of held without waiting, and returns how many
// it took.
func (b *budget) take(n int) int {
	for k := 0; k < n; k++ {
		select {
		case b.held <- struct{}{}:
		default:
			return k
		}
	}
	return n
}

// give gives n tokens back and wakes those waiting for one.
func (b *budget) give(n int) {
	if n <= 0 {
		return
	}
	for range n {
		<-b.held
	}
	b.mu.Lock()
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// released returns a channel closed when tokens are next given back.
func (b *budget) released() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.freed
}

// deliverLoop claims due reactions and attempts them, at most
// e.concurrency at once across the Engines sharing e.budget. A claim takes
// up to twice as many as that (the second half wait in this process for a
// free slot), so that at a steady rate one claim serves a whole claimPace;
// it first takes a token of the budget for each reaction it may claim, so
// that the Engines of a group never hold more claimed reactions than that
// together. While reactions are due faster than they can be attempted it
// claims again as soon as no more than e.concurrency claimed ones are
// left. Otherwise it sleeps until the earliest due time (an index read), a
// wake-up, or the poll interval, whichever comes first, but claims at most
// once per claimPace: reactions falling due one by one are claimed
// together, up to claimPace after they fell due, in one write instead of
// one each.
func (e *Engine) deliverLoop(ctx context.Context) {
	var wg sync.WaitGroup
	b := e.budget
	outcomes := make(chan storage.ReactionOutcome, 2*e.concurrency)
	finished := make(chan struct{})
	go func() { e.record(ctx, outcomes); close(finished) }()
	defer func() {
		wg.Wait()
		close(outcomes)
		<-finished
	}()
	var lastClaim time.Time
	for ctx.Err() == nil {
		freed := b.released()
		free := b.take(cap(b.held))
		claimed := 0
		if free > 0 {
			now := e.now()
			lastClaim = time.Now()
			rs, err := e.rs.ClaimReactions(ctx, storage.ReactionClaim{Now: now, Until: now.Add(e.lease),
				Claim: uuid.NewString(), Limit: free})
			b.give(free - len(rs))
			if err != nil && ctx.Err() == nil {
				e.log.Warn("reactions: claiming due reactions failed, retrying", "err", err)
				sleep(ctx, e.poll)
				continue
			}
			claimed = len(rs)
			for _, r := range rs {
				wg.Go(func() {
					defer b.give(1)
					select {
					case b.slots <- struct{}{}:
					case <-ctx.Done():
						outcomes <- e.handBack(r) // not attempted
						return
					}
					o, ok := e.attempt(ctx, r)
					<-b.slots
					if !ok {
						o = e.handBack(r) // cut short by the shutdown
					}
					outcomes <- o
				})
			}
		}
		if claimed == free {
			// More may be due (or nothing could be claimed, the budget
			// being in use): claim again once no more than e.concurrency
			// are held, so that a claim takes many at once and the slots
			// never run dry.
			for ctx.Err() == nil && len(b.held) > e.concurrency {
				select {
				case <-ctx.Done():
				case <-freed:
				}
				freed = b.released()
			}
			if claimed > 0 {
				continue
			}
		}
		wait := e.poll
		if due, ok, err := e.rs.NextReactionDue(ctx); err == nil && ok {
			wait = min(wait, max(time.Until(due), time.Millisecond))
		}
		wait = max(wait, e.pace(claimPace)-time.Since(lastClaim))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-e.wakeDeliver:
			// New reactions or a retry: let claimPace pass since the last
			// claim, so that a burst of them is claimed at once.
			sleep(ctx, e.pace(claimPace)-time.Since(lastClaim))
		case <-t.C:
		}
		t.Stop()
	}
}

// handBack returns the outcome that hands r, claimed but not delivered
// when Run stops, back to the other processes: pending and due now, so
// that a rolling restart does not leave it waiting for the end of its
// lease. Its count of attempts keeps the one its claim added.
func (e *Engine) handBack(r storage.Reaction) storage.ReactionOutcome {
	now := e.now()
	return storage.ReactionOutcome{ID: r.ID, Claim: r.Claim, State: storage.ReactionPending, DueAt: now, At: now,
		Error: "not delivered: the process stopped"}
}

// attempt makes one attempt of r and returns its outcome, or false when
// ctx ended during a failed call (the lease then ends and the reaction is
// retried).
func (e *Engine) attempt(ctx context.Context, r storage.Reaction) (storage.ReactionOutcome, bool) {
	ctx, span := e.deliverySpan(ctx, &r)
	o, ok := e.attemptOnce(ctx, r)
	endDelivery(span, o, ok)
	return o, ok
}

// attemptOnce is attempt without its span.
func (e *Engine) attemptOnce(ctx context.Context, r storage.Reaction) (storage.ReactionOutcome, bool) {
	err := e.call(ctx, r)
	if ctx.Err() != nil && err != nil {
		return storage.ReactionOutcome{}, false
	}
	o := storage.ReactionOutcome{ID: r.ID, Claim: r.Claim, State: storage.ReactionCompleted, At: e.now()}
	var final *finalError
	switch {
	case err == nil:
	case errors.As(err, &final):
		o.State, o.Error = final.state, final.msg
	case r.Attempts >= e.attempts:
		o.State, o.Error = storage.ReactionFailed, err.Error()
	default:
		o.State, o.Error = storage.ReactionPending, err.Error()
		o.DueAt = e.now().Add(e.retryDelay(r.Attempts))
	}
	if err != nil {
		e.log.Info("reactions: attempt failed", "reaction", r.ID, "definition", r.Definition,
			"attempt", r.Attempts, "err", err, "next", o.DueAt)
	}
	return o, true
}

// maxRecordBatch bounds the outcomes recorded in one FinishReactions.
const maxRecordBatch = 256

// record writes the outcomes of attempts as they come, gathering them for
// recordPace after the first (or until maxRecordBatch wait) so that one
// transaction records many deliveries, until outcomes is closed. It writes
// with a context of its own, so that a shutdown still records the
// attempts that ended. A retry it records wakes the delivery loop, whose
// next due time may now be sooner.
func (e *Engine) record(ctx context.Context, outcomes <-chan storage.ReactionOutcome) {
	batch := make([]storage.ReactionOutcome, 0, maxRecordBatch)
	t := time.NewTimer(0)
	defer t.Stop()
	for o := range outcomes {
		batch = append(batch[:0], o)
		t.Reset(e.pace(recordPace))
	more:
		for len(batch) < maxRecordBatch {
			select {
			case o, ok := <-outcomes:
				if !ok {
					break more
				}
				batch = append(batch, o)
			case <-t.C:
				break more
			}
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		errs, err := e.rs.FinishReactions(wctx, batch)
		cancel()
		if err != nil {
			e.log.Warn("reactions: recording attempts failed; their leases end and they are attempted again", "count", len(batch), "err", err)
		}
		retry := false
		for i, err := range errs {
			if err != nil {
				e.log.Warn("reactions: recording an attempt failed", "reaction", batch[i].ID, "err", err)
			}
			retry = retry || err == nil && batch[i].State == storage.ReactionPending
		}
		if retry {
			wake(e.wakeDeliver)
		}
	}
}

// retryDelay is the delay after the n-th failed attempt: Backoff,
// doubling, at most a day.
func (e *Engine) retryDelay(n int) time.Duration {
	d := e.backoff
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// finalError ends a reaction at once, without retries.
type finalError struct {
	state storage.ReactionState
	msg   string
}

func (e *finalError) Error() string { return e.msg }

// call runs r's action once.
func (e *Engine) call(ctx context.Context, r storage.Reaction) error {
	spec, err := e.specOf(ctx, r.Definition)
	if errors.Is(err, eventstore.ErrNotFound) {
		return &finalError{storage.ReactionCanceled, "the reaction's definition was deleted"}
	}
	if err != nil {
		return fmt.Errorf("reading the definition: %v", err)
	}
	c, err := e.compiledOf(spec)
	if err != nil {
		return &finalError{storage.ReactionFailed, err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	if c.def.Action.Type == ActionFunc {
		fn := e.fns[c.def.Action.Function]
		if fn == nil {
			return fmt.Errorf("no Go function %q is registered in this process", c.def.Action.Function)
		}
		return fn(ctx, Delivery{Reaction: reaction(&r, e.now()), Body: r.Payload})
	}
	return e.post(ctx, c, r)
}

// Sign returns the hex HMAC-SHA256 of body keyed with secret: the value of
// HeaderSignature. A receiver checks a delivery by computing it over the
// exact bytes received and comparing with hmac.Equal.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// post delivers r to an HTTP_POST action's target.
func (e *Engine) post(ctx context.Context, c *compiled, r storage.Reaction) error {
	a := c.def.Action
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.TargetURI, bytes.NewReader(r.Payload))
	if err != nil {
		return &finalError{storage.ReactionFailed, "the target address is not usable"}
	}
	for k, v := range a.HTTPHeaders {
		req.Header.Set(k, v)
	}
	secret := a.SigningSecret
	if secret == "" {
		secret = c.def.Name
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderSignature, Sign(secret, r.Payload))
	req.Header.Set(HeaderReactionID, r.ID)
	req.Header.Set("User-Agent", "eventstore-reactions")
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := e.http.Do(req)
	if err == nil {
		tracing.SpanOf(ctx).SetAttributes(semconvStatus.Int(resp.StatusCode))
	}
	if err != nil {
		if errors.Is(err, ErrRefusedAddress) {
			return fmt.Errorf("the target's address is refused by the server's outbound policy")
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("no answer within %v", e.timeout)
		}
		return errors.New(callProblem(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, e.maxResponse))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the target answered %d", resp.StatusCode)
	}
	return nil
}

// callProblem says why a call failed in words for users, without the
// Go error chain (which repeats the URL and the resolver's internals).
func callProblem(err error) string {
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.As(err, &dns):
		return "the target's host name does not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the target refused the connection"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the target closed the connection without an answer"
	case errors.As(err, &op) && op.Timeout():
		return "the connection to the target timed out"
	case strings.Contains(err.Error(), "tls:") || strings.Contains(err.Error(), "x509:"):
		return "the TLS handshake with the target failed"
	}
	return "the call to the target failed"
}

// specTTL is how long a definition read for deliveries is used before it
// is read again: a change or deletion reaches deliveries within it.
const specTTL = time.Second

type cachedSpec struct {
	spec []byte
	read time.Time
}

// specOf returns the spec of definition name, read at most specTTL ago.
func (e *Engine) specOf(ctx context.Context, name string) ([]byte, error) {
	e.mu.Lock()
	c, ok := e.specs[name]
	e.mu.Unlock()
	if ok && time.Since(c.read) < specTTL {
		return c.spec, nil
	}
	rec, err := e.rs.ReactionDefinition(ctx, name)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if len(e.specs) > 2*e.maxDefs {
		clear(e.specs)
	}
	e.specs[name] = cachedSpec{rec.Spec, time.Now()}
	e.mu.Unlock()
	return rec.Spec, nil
}
