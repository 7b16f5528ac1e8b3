package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Listener is one LISTEN connection shared by the Storages opened with it
// (Options.Listener). Without one, WatchAppends of every Storage holds a
// connection of its own, outside the pool: with a schema per tenant, a
// thousand open tenants would hold a thousand connections, ten times
// PostgreSQL's default max_connections, for their notifications alone.
// With one, they share this connection, and their pools can be one pool
// too (Open any number of schemas on one pgxpool.Pool).
//
// The Listener connects with the configuration of the pool given to
// NewListener, on first use; a subscription waits for its channel to be
// listened to, so it learns of every append committed after WatchAppends
// reported it listening. When the connection fails, every WatchAppends
// using it returns an error wrapping storage.ErrUnavailable (the Store
// polls and retries, as with a connection of its own) and the next one
// connects again. Its methods are safe for concurrent use.
type Listener struct {
	pool    *pgxpool.Pool
	control string // channel of the Listener's own wake-ups

	mu     sync.Mutex
	subs   map[string]map[*listenSub]struct{} // channel → subscribers
	route  map[route]map[*listenSub]struct{}  // channel and tenant → subscribers
	recent map[string]*inFlightAnswer         // channel → its last answer of inFlight
	broken chan struct{}                      // closed when the current connection fails
	closed bool
	cancel context.CancelFunc // stops the connection's goroutine
	done   chan struct{}      // closed when that goroutine returns; nil before it starts
}

// inFlightAnswer is the last answer for a channel of whether appends are
// in flight, shared by the subscriptions of the channel: they ask after
// each notification (see watch), and with many tenants on one channel
// each append notifies another one, so that asking each time would cost a
// query per append.
type inFlightAnswer struct {
	mu      sync.Mutex
	at      time.Time
	pending bool
}

// inFlight answers ask (whether appends are in flight on channel), asking
// the server at most once every half inFlightRecheck for all the
// subscriptions of the channel: a subscription that asks meanwhile gets
// the last answer. An answer that is out of date by then only makes a
// subscription look again or wake its Store once more.
func (l *Listener) inFlight(ctx context.Context, channel string, ask func(context.Context) (bool, error)) (bool, error) {
	l.mu.Lock()
	a := l.recent[channel]
	if a == nil {
		a = &inFlightAnswer{}
		l.recent[channel] = a
	}
	l.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.at.IsZero() && time.Since(a.at) < inFlightRecheck/2 {
		return a.pending, nil
	}
	pending, err := ask(ctx)
	if err != nil {
		return false, err
	}
	a.at, a.pending = time.Now(), pending
	return pending, nil
}

// route is where a notification goes: its channel (a schema's) and its
// payload (the tenant written to).
type route struct{ channel, tenant string }

// listenSub is one WatchAppends waiting on a Listener.
type listenSub struct {
	notify func()        // on a notification
	start  func()        // once listening
	ready  chan struct{} // closed once the channel is listened to
	armed  bool          // ready is closed
}

// NewListener returns a Listener that connects like pool (its connection
// configuration, outside its size) and wakes itself through it. The pool
// must stay open until the Listener is closed.
func NewListener(pool *pgxpool.Pool) *Listener {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return &Listener{
		pool:    pool,
		control: "eventstore.listener." + hex.EncodeToString(b[:]),
		subs:    map[string]map[*listenSub]struct{}{},
		route:   map[route]map[*listenSub]struct{}{},
		recent:  map[string]*inFlightAnswer{},
		broken:  make(chan struct{}),
	}
}

// Close ends the connection; WatchAppends on the Listener then returns an
// error wrapping storage.ErrClosed. Close is idempotent.
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

// watch serves WatchAppends of a Storage of tenant on channel: notify is
// called once the channel is listened to and on every notification of
// tenant's appends, until ctx is done (nil), stop is closed (ErrClosed) or the connection fails
// (ErrUnavailable). As WatchAppends on a connection of its own does,
// after notifications it waits until none has come for inFlightRecheck,
// then asks inFlight (on the pool) whether appends are in flight, and
// again every inFlightRecheck while some are; when none is, it notifies
// once more (an append that rolled back notified nobody).
func (l *Listener) watch(ctx context.Context, channel, tenant string, notify func(), stop <-chan struct{}, inFlight func(context.Context) (bool, error)) error {
	kick := make(chan struct{}, 1)
	sub := &listenSub{notify: func() {
		notify()
		select {
		case kick <- struct{}{}:
		default:
		}
	}, start: notify, ready: make(chan struct{})}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return fmt.Errorf("postgres: watch appends: the listener is closed: %w", storage.ErrClosed)
	}
	if l.subs[channel] == nil {
		l.subs[channel] = map[*listenSub]struct{}{}
	}
	l.subs[channel][sub] = struct{}{}
	r := route{channel, tenant}
	if l.route[r] == nil {
		l.route[r] = map[*listenSub]struct{}{}
	}
	l.route[r][sub] = struct{}{}
	broken := l.broken
	if l.done == nil {
		lctx, cancel := context.WithCancel(context.Background())
		l.cancel, l.done = cancel, make(chan struct{})
		go l.run(lctx, l.done)
	}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.subs[channel], sub)
		if len(l.subs[channel]) == 0 {
			delete(l.subs, channel) // unlistened at the next wake-up
			delete(l.recent, channel)
		}
		delete(l.route[r], sub)
		if len(l.route[r]) == 0 {
			delete(l.route, r)
		}
		l.mu.Unlock()
	}()
	// Wake the connection so that it listens to channel. A wake-up lost
	// to a connection that is just (re)connecting does no harm: it
	// listens to every subscribed channel when it starts.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := l.pool.Exec(wctx, "SELECT pg_notify($1, '')", l.control)
	cancel()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("postgres: watch appends: wake the listener: %v: %w", err, storage.ErrUnavailable)
	}
	ready := sub.ready
	recheck := time.NewTimer(time.Hour)
	recheck.Stop()
	defer recheck.Stop()
	for {
		select {
		case <-ready:
			ready = nil // armed: the listener calls notify from now on
		case <-kick:
			recheck.Reset(inFlightRecheck)
		case <-recheck.C:
			pending, err := l.inFlight(ctx, channel, inFlight)
			switch {
			case ctx.Err() != nil:
				return nil
			case err != nil:
				return fmt.Errorf("postgres: watch appends: %v: %w", err, storage.ErrUnavailable)
			case pending:
				recheck.Reset(inFlightRecheck)
			default:
				notify()
			}
		case <-broken:
			l.mu.Lock()
			closed := l.closed
			l.mu.Unlock()
			if closed {
				return fmt.Errorf("postgres: watch appends: the listener is closed: %w", storage.ErrClosed)
			}
			return fmt.Errorf("postgres: watch appends: the shared listener's connection failed: %w", storage.ErrUnavailable)
		case <-stop:
			return fmt.Errorf("postgres: watch appends: %w", storage.ErrClosed)
		case <-ctx.Done():
			return nil
		}
	}
}

// run keeps the connection until ctx is done, connecting again after a
// failure.
func (l *Listener) run(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		started := time.Now()
		err := l.serve(ctx)
		l.mu.Lock()
		close(l.broken) // every subscription made before returns
		l.broken = make(chan struct{})
		l.mu.Unlock()
		if ctx.Err() != nil || err == nil {
			return
		}
		if time.Since(started) > 2*time.Second {
			backoff = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// serve connects, listens to the control channel and to every subscribed
// channel, and passes notifications on until the connection fails or ctx
// is done.
func (l *Listener) serve(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.control}.Sanitize()); err != nil {
		return err
	}
	listening := map[string]bool{}
	if err := l.sync(ctx, conn, listening); err != nil {
		return err
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, livenessIdle)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && ctx.Err() == nil && wctx.Err() != nil && !conn.IsClosed() {
			// Quiet for livenessIdle: is the server still there (see
			// store.hung)? If not, connect again (to the new primary) and
			// drop the pool's connections.
			if err := pingConn(ctx, conn); err != nil {
				l.pool.Reset()
				return fmt.Errorf("the server did not answer a ping within %v: %w", livenessTimeout, err)
			}
			continue
		}
		if err != nil {
			return err
		}
		if n.Channel == l.control { // a subscription came or went
			if err := l.sync(ctx, conn, listening); err != nil {
				return err
			}
			continue
		}
		l.mu.Lock()
		for sub := range l.route[route{n.Channel, n.Payload}] {
			if sub.armed {
				sub.notify()
			}
		}
		l.mu.Unlock()
	}
}

// sync listens to the subscribed channels not listened to yet, arms their
// new subscriptions (notify once, then ready) and unlistens channels
// without subscribers.
func (l *Listener) sync(ctx context.Context, conn *pgx.Conn, listening map[string]bool) error {
	l.mu.Lock()
	var add, drop []string
	for ch := range l.subs {
		if !listening[ch] {
			add = append(add, ch)
		}
	}
	for ch := range listening {
		if l.subs[ch] == nil {
			drop = append(drop, ch)
		}
	}
	l.mu.Unlock()
	for _, ch := range add {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
		listening[ch] = true
	}
	for _, ch := range drop {
		if _, err := conn.Exec(ctx, "UNLISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
		delete(listening, ch)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch, subs := range l.subs {
		if !listening[ch] {
			continue // subscribed meanwhile: the wake-up of it is queued
		}
		for sub := range subs {
			if !sub.armed {
				sub.armed = true
				sub.start()
				close(sub.ready)
			}
		}
	}
	return nil
}

// appendsInFlight reports whether an append to s is registered in flight
// (statements.inFlight), on a pooled connection.
func (s *store) appendsInFlight(ctx context.Context) (bool, error) {
	var pending bool
	err := s.pool.QueryRow(ctx, s.sql.inFlight).Scan(&pending)
	return pending, err
}
