package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// announce notifies the listeners of the schema's channel (WatchAppends,
// in every process) that appends committed. The notification is sent
// after the commit, by a goroutine that runs only while there is
// something to send and folds the appends that commit meanwhile into one
// more notification.
//
// Not inside the appending transaction: a transaction that notifies takes
// a lock of the whole server ("database 0") at its commit and holds it
// until the commit is durable, so appends that notified committed one at a
// time across every process, which undid the point of releasing the
// append lock before the commit. A notification's own transaction commits
// with synchronous_commit off: it stores nothing, and holds that lock for
// microseconds. An append whose process dies between its commit and its
// notification wakes no listener; the listeners of other processes see it
// with the next append, or at their fallback poll.
func (s *store) announce() {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	if s.notifying {
		s.notifyAgain = true
		return
	}
	if s.closed.Load() {
		return
	}
	s.notifying = true
	s.notifyWG.Add(1)
	go s.sendNotifications()
}

// sendNotifications sends notifications until none is due; see announce.
func (s *store) sendNotifications() {
	defer s.notifyWG.Done()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
		b := &pgx.Batch{}
		b.Queue("SELECT set_config('synchronous_commit', 'off', true)")
		b.Queue("SELECT pg_notify($1, '')", s.channel)
		err := s.pool.SendBatch(ctx, b).Close()
		cancel()
		s.notifyMu.Lock()
		if err != nil && !s.closed.Load() {
			// The next append announces again; until then, try again
			// shortly (the listeners' fallback poll is much longer).
			s.notifyAgain = true
		}
		if !s.notifyAgain || s.closed.Load() {
			s.notifying = false
			s.notifyMu.Unlock()
			return
		}
		s.notifyAgain = false
		s.notifyMu.Unlock()
		if err != nil {
			select {
			case <-time.After(notifyRetry):
			case <-s.done:
			}
		}
	}
}

// notifyRetry is how long sendNotifications waits after a failed
// notification before the next try.
const notifyRetry = 100 * time.Millisecond
