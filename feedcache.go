package eventstore

import (
	"context"
	"sync"

	"github.com/eventkit-go/eventstore/storage"
)

// pageCache shares the feed pages one CatchUp pass reads among the
// projections it brings up to date, so that many definitions at the same
// position read the feed once instead of once each. Only full pages are
// kept: a full page can never gain events (the feed never shows an event
// below a visible one later), while a short page at the head can. The
// cache is dropped when events are deleted.
type pageCache struct {
	storage storage.Storage
	gen     func() int64 // the Store's deletion count

	mu      sync.Mutex
	at      int64 // gen the entries belong to
	entries map[storage.FeedQuery]*pageEntry
	order   []storage.FeedQuery
}

type pageEntry struct {
	done chan struct{}
	page storage.FeedPage
	err  error
}

// maxCachedPages bounds the pages one pass keeps.
const maxCachedPages = 16

func newPageCache(s storage.Storage, gen func() int64) *pageCache {
	return &pageCache{storage: s, gen: gen, at: gen(), entries: make(map[storage.FeedQuery]*pageEntry)}
}

// read returns the page q selects, reading it from the storage unless
// another projection of this pass has, or is reading it now.
func (c *pageCache) read(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	c.mu.Lock()
	if g := c.gen(); g != c.at {
		c.at, c.entries, c.order = g, make(map[storage.FeedQuery]*pageEntry), nil
	}
	if e := c.entries[q]; e != nil {
		c.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return storage.FeedPage{}, ctx.Err()
		}
		if e.err == nil {
			return e.page, nil
		}
		return c.storage.ReadFeed(ctx, q)
	}
	e := &pageEntry{done: make(chan struct{})}
	c.entries[q] = e
	c.order = append(c.order, q)
	if len(c.order) > maxCachedPages {
		delete(c.entries, c.order[0])
		c.order = c.order[1:]
	}
	c.mu.Unlock()

	e.page, e.err = c.storage.ReadFeed(ctx, q)
	if e.err != nil || len(e.page.Events) < q.Limit {
		// Not reusable: a failure, or a page the head may still grow.
		c.mu.Lock()
		if c.entries[q] == e {
			delete(c.entries, q)
		}
		c.mu.Unlock()
	}
	close(e.done)
	return e.page, e.err
}
