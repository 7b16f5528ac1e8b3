package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/internal/hooks"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fullStorage is an in-memory Storage whose writes fail with ErrFull, as
// a backend's do on a full disk, while full is set.
type fullStorage struct {
	storage.Storage
	full atomic.Bool
}

func (f *fullStorage) Append(ctx context.Context, req storage.AppendRequest) (storage.AppendResult, error) {
	if f.full.Load() {
		return storage.AppendResult{}, fmt.Errorf("disk: no space left on device: %w", eventstore.ErrFull)
	}
	return f.Storage.Append(ctx, req)
}

func (f *fullStorage) AppendAll(ctx context.Context, reqs []storage.AppendRequest) ([]storage.AppendResult, error) {
	if f.full.Load() {
		return nil, fmt.Errorf("disk: no space left on device: %w", eventstore.ErrFull)
	}
	return f.Storage.AppendAll(ctx, reqs)
}

func (f *fullStorage) CommitProjection(ctx context.Context, c storage.ProjectionCommit) error {
	if f.full.Load() {
		return fmt.Errorf("disk: no space left on device: %w", eventstore.ErrFull)
	}
	return f.Storage.CommitProjection(ctx, c)
}

// TestOutOfSpace: a save on a full storage is 507 insufficient_storage,
// without Retry-After and without the backend's text; /readyz reports it;
// projection reads keep answering; all of it ends with the first save that
// succeeds once there is space.
func TestOutOfSpace(t *testing.T) {
	fs := &fullStorage{Storage: memory.New()}
	st, err := eventstore.New(fs, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	p := eventstore.NewProjector(st, nil)
	e := &env{t: t, st: st, p: p, h: httpapi.New(st, p, &httpapi.Options{
		Keys: []httpapi.KeyPair{{AccessKey: testAccess, SecretAccessKey: testSecret}}})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { return hooks.ProjectorRunning(p) }, 5*time.Second, 10*time.Millisecond)

	e.must(http.StatusOK, http.MethodPost, "/projections/definitions",
		`{"projectionName":"n","feedName":"order","aggregated":true,"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.count"}]}]}`)
	e.must(http.StatusOK, http.MethodPost, "/aggregates/order/o-1/events", events(ev("00000000-0000-4000-8000-000000000001", "Placed", "")))
	e.must(http.StatusOK, http.MethodGet, "/projections/aggregated/n", "")

	fs.full.Store(true)
	res := e.do(http.MethodPost, "/aggregates/order/o-2/events", events(ev("00000000-0000-4000-8000-000000000002", "Placed", "")))
	assert.Empty(t, res.Header.Get("Retry-After"), "retrying at once does not help")
	b := mustErr(t, res, http.StatusInsufficientStorage, "insufficient_storage")
	assert.Contains(t, b.Message, "out of space")
	assert.NotContains(t, b.Message, "no space left on device", "the backend's text stays in the log")
	res = e.do(http.MethodPost, "/aggregates/order/events",
		`{"batches":[{"aggregateId":"o-3",`+strings.TrimPrefix(events(ev("00000000-0000-4000-8000-000000000003", "Placed", "")), "{")+`]}`)
	mustErr(t, res, http.StatusInsufficientStorage, "insufficient_storage")

	res = e.do(http.MethodGet, "/readyz", "")
	raw, _ := io.ReadAll(res.Body)
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	var body map[string]any
	require.NoError(t, json.Unmarshal(raw, &body))
	assert.Equal(t, "not ready: the store is out of space", body["message"])
	got := readBody(t, e.must(http.StatusOK, http.MethodGet, "/projections/aggregated/n", ""))
	assert.Contains(t, got, `"count":"1"`, "projection reads answer while the store is full")

	fs.full.Store(false)
	e.must(http.StatusOK, http.MethodPost, "/aggregates/order/o-2/events", events(ev("00000000-0000-4000-8000-000000000002", "Placed", "")))
	e.must(http.StatusOK, http.MethodGet, "/readyz", "")
}
