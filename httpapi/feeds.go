package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/internal/names"
)

// HeaderSequenceNumber is the header of HEAD /feeds/{type} holding the
// feed's current sequence number.
const HeaderSequenceNumber = "Serialized-SequenceNumber-Current"

// allFeed is the path segment of the feed of all aggregate types.
const allFeed = names.AllFeed

// DefaultMaxLongPolls is the number of long polls (feed reads with a
// waitTime) that may wait at once when Options.MaxLongPolls is zero.
const DefaultMaxLongPolls = 1000

type feedInfoJSON struct {
	AggregateType  string `json:"aggregateType"`
	AggregateCount int64  `json:"aggregateCount"`
	BatchCount     int64  `json:"batchCount"`
	EventCount     int64  `json:"eventCount"`
}

// feeds serves GET /feeds.
func (h *handler) feeds(w http.ResponseWriter, r *http.Request) {
	fs, err := h.store(r).Feeds(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := struct {
		Feeds []feedInfoJSON `json:"feeds"`
	}{Feeds: make([]feedInfoJSON, len(fs))}
	for i, f := range fs {
		out.Feeds[i] = feedInfoJSON(f)
	}
	h.sendValue(w, r, out)
}

type feedEntryJSON struct {
	SequenceNumber int64       `json:"sequenceNumber"`
	AggregateID    string      `json:"aggregateId"`
	AggregateType  string      `json:"aggregateType"`
	FeedName       string      `json:"feedName"`
	Timestamp      int64       `json:"timestamp"`
	Events         []eventJSON `json:"events"`
}

type feedJSON struct {
	Entries               []feedEntryJSON `json:"entries"`
	HasMore               bool            `json:"hasMore"`
	CurrentSequenceNumber int64           `json:"currentSequenceNumber"`
}

// feedType returns the aggregate type a /feeds/{type} path names, "" for
// _all.
func feedType(r *http.Request) (string, error) {
	seg, err := segments(r, "type")
	if err != nil {
		return "", err
	}
	if seg[0] == allFeed {
		return "", nil
	}
	return seg[0], nil
}

// feedHead serves HEAD /feeds/{type}: the current sequence number in a
// header.
func (h *handler) feedHead(w http.ResponseWriter, r *http.Request) {
	typ, err := feedType(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	head, err := h.store(r).FeedHead(r.Context(), typ)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set(HeaderSequenceNumber, strconv.FormatInt(head, 10))
	w.WriteHeader(http.StatusOK)
}

// feed serves GET /feeds/{type}: entries after since, possibly after a
// long poll.
func (h *handler) feed(w http.ResponseWriter, r *http.Request) {
	typ, err := feedType(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q, err := parseQuery(r, "since", "limit", "waitTime", "partitionCount", "partitionNumber", "from", "to")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := q.only("since", "limit", "waitTime", "partitionCount", "partitionNumber", "filterType", "from", "to"); err != nil {
		h.fail(w, r, err)
		return
	}
	since, err := q.int("since", 0, 0, math.MaxInt64)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	limit, err := q.int("limit", defaultFeedLimit, 1, maxFeedLimit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	wait, err := q.int("waitTime", 0, 0, maxWaitMillis)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	opts := &eventstore.FeedOptions{Limit: int(limit), Wait: time.Duration(wait) * time.Millisecond}
	if opts.From, err = q.time("from", false); err != nil {
		h.fail(w, r, err)
		return
	}
	if opts.To, err = q.time("to", true); err != nil {
		h.fail(w, r, err)
		return
	}
	if !opts.From.IsZero() && !opts.To.IsZero() && opts.From.After(opts.To) {
		h.fail(w, r, &queryError{"from", fmt.Sprintf("must not be after to, got from %s and to %s", q.v["from"][0], q.v["to"][0])})
		return
	}
	if q.has("partitionCount") || q.has("partitionNumber") {
		if !q.has("partitionCount") || !q.has("partitionNumber") {
			h.fail(w, r, &queryError{"partitionCount", "and partitionNumber must be given together"})
			return
		}
		count, err := q.int("partitionCount", 0, 1, limits.MaxPartitionCount)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		number, err := q.int("partitionNumber", 0, 0, count-1)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		opts.PartitionCount, opts.PartitionNumber = int(count), int(number)
	}
	if types := q.v["filterType"]; len(types) > 0 {
		switch {
		case typ != "":
			h.fail(w, r, &queryError{"filterType", "is only allowed on /feeds/" + allFeed})
			return
		case len(types) > limits.MaxFeedTypes:
			h.fail(w, r, &queryError{"filterType", fmt.Sprintf("may be given at most %d times, got %d", limits.MaxFeedTypes, len(types))})
			return
		}
		for _, t := range types {
			if err := names.Check(t); err != nil {
				h.fail(w, r, &queryError{"filterType", fmt.Sprintf("%q %v", clip(t), err)})
				return
			}
		}
		opts.Types = types
	}
	if opts.Wait > 0 {
		// Bound the waiting requests: beyond the limit, answer at once.
		select {
		case h.polls <- struct{}{}:
			defer func() { <-h.polls }()
		default:
			opts.Wait = 0
		}
	}
	h.streamFeed(w, r, typ, since, *opts)
}
