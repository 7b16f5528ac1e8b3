package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/eventkit-go/eventstore"
)

// progressEvery is how often the projector's catching up is logged.
const progressEvery = 5 * time.Second

// reportStartup logs the size of the store, then, every interval until
// every projection has reached the head of the feed (or ctx is done), how
// far the projector is behind, how fast it catches up and when it should
// be done, so that a server starting on a large store says what it is
// doing.
func reportStartup(ctx context.Context, st *eventstore.Store, p *eventstore.Projector, log *slog.Logger, interval time.Duration) {
	head, err := st.FeedHead(ctx, "")
	if err != nil {
		log.Warn("startup: read the feed head", "err", err)
		return
	}
	defs, err := p.Definitions(ctx)
	if err != nil {
		log.Warn("startup: read the projection definitions", "err", err)
		return
	}
	log.Info("store opened", "feed_head", head, "projections", len(defs))
	if len(defs) == 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var prev int64 = -1
	prevAt := time.Now()
	for {
		ov, err := p.Statuses(ctx)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("startup: projections overview", "err", err)
			}
			return
		}
		var behind, most int64
		n := 0
		for _, s := range ov {
			// Behind, not Head - Checkpoint: the newest events may be of
			// types no projection reads, which leaves the checkpoints
			// below the head with nothing to catch up.
			if lag := s.Behind; lag > 0 {
				behind += lag
				most = max(most, lag)
				n++
			}
		}
		if n == 0 {
			log.Info("projections caught up", "projections", len(ov))
			return
		}
		attrs := []any{"projections_behind", n, "positions_behind", behind, "most_behind", most}
		if prev >= 0 {
			rate := float64(prev-behind) / time.Since(prevAt).Seconds()
			attrs = append(attrs, "per_second", int64(rate))
			if rate > 0 {
				attrs = append(attrs, "eta", (time.Duration(float64(behind)/rate) * time.Second).Round(time.Second).String())
			}
		}
		log.Info("projector catching up", attrs...)
		prev, prevAt = behind, time.Now()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
