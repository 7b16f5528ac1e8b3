package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/storage/postgres"
)

// lagCacheFor is how long a scrape reuses the projections overview.
const lagCacheFor = 5 * time.Second

// promMetrics exports the server's figures in the Prometheus format. It
// implements eventstore.Metrics; observe is the httpapi Observer. It uses
// its own registry: nothing is registered globally.
//
// The request series carry a tenant label (empty for the default data
// space, which Prometheus stores as no label) and, with named, a project
// label: the project's name, never a key. Tenants are at most
// tenancy.DefaultMaxTenants live per project, and a deleted tenant's
// series are dropped (forgetTenant), so the labels stay bounded.
type promMetrics struct {
	reg   *prometheus.Registry
	named bool

	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	events        prometheus.Counter
	batches       prometheus.Counter
	conflicts     prometheus.Counter
	storageErrors *prometheus.CounterVec
	applied       *prometheus.CounterVec
	failed        *prometheus.CounterVec
	rewinds       prometheus.Counter
}

var (
	_ eventstore.Metrics       = (*promMetrics)(nil)
	_ eventstore.RewindMetrics = (*promMetrics)(nil)
)

// newPromMetrics returns the metrics of a server; named reports projects
// from a key file, whose names label the series.
func newPromMetrics(named bool) *promMetrics {
	requestLabels := []string{"method", "route", "status", "tenant"}
	if named {
		requestLabels = []string{"method", "route", "status", "project", "tenant"}
	}
	m := &promMetrics{
		reg:   prometheus.NewRegistry(),
		named: named,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventstore_http_requests_total",
			Help: "HTTP requests served, by method, route pattern, status, project and tenant.",
		}, requestLabels),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "eventstore_http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by method, route pattern, status, project and tenant.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, requestLabels),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventstore_events_saved_total", Help: "Events stored (retried duplicates not counted).",
		}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventstore_batches_saved_total", Help: "Batches stored: saves, and batches of bulk saves.",
		}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventstore_conflicts_total", Help: "Saves refused for a version conflict.",
		}),
		storageErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventstore_storage_errors_total", Help: "Storage calls that failed for a reason other than the request, by operation.",
		}, []string{"op"}),
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventstore_projection_events_applied_total", Help: "Feed events the projector applied, by projection.",
		}, []string{"projection"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eventstore_projection_events_failed_total", Help: "Feed events a projection could not apply (recorded as errors), by projection.",
		}, []string{"projection"}),
		rewinds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eventstore_rewinds_total",
			Help: "Times the storage was found behind positions already handed out (a failover that lost the last commits, a restored backup).",
		}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.events, m.batches, m.conflicts, m.storageErrors, m.applied, m.failed, m.rewinds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Export the usual operations at 0, so that a rate of errors has a
	// series to start from.
	for _, op := range []string{"Append", "AppendAll", "Load", "ReadFeed", "FeedHead", "CommitProjection", "LoadProjection", "WatchAppends"} {
		m.storageErrors.WithLabelValues(op)
	}
	return m
}

// Saved implements eventstore.Metrics.
func (m *promMetrics) Saved(events int) {
	m.batches.Inc()
	m.events.Add(float64(events))
}

// Conflict implements eventstore.Metrics.
func (m *promMetrics) Conflict() { m.conflicts.Inc() }

// StorageError implements eventstore.Metrics.
func (m *promMetrics) StorageError(op string) { m.storageErrors.WithLabelValues(op).Inc() }

// Rewound implements eventstore.RewindMetrics.
func (m *promMetrics) Rewound() { m.rewinds.Inc() }

// Projected implements eventstore.Metrics.
func (m *promMetrics) Projected(projection string, events, failed int) {
	m.applied.WithLabelValues(projection).Add(float64(events - failed))
	if failed > 0 {
		m.failed.WithLabelValues(projection).Add(float64(failed))
	}
}

// observer returns the Observer that records the requests of project (""
// for the one project of the environment keys, or for keys of no
// project).
func (m *promMetrics) observer(project string) func(httpapi.RequestInfo) {
	return func(ri httpapi.RequestInfo) {
		route := ri.Route
		if route == "" {
			route = "unrouted"
		}
		// ri.Tenant is set only for a live tenant of the project
		// (unknown ids are refused before), so it adds no unbounded values.
		labels := []string{ri.Method, route, strconv.Itoa(ri.Status), ri.Tenant}
		if m.named {
			labels = []string{ri.Method, route, strconv.Itoa(ri.Status), project, ri.Tenant}
		}
		m.requests.WithLabelValues(labels...).Inc()
		m.latency.WithLabelValues(labels...).Observe(ri.Duration.Seconds())
	}
}

// forgetTenant drops the request series of tenant id of project, once it
// is deleted.
func (m *promMetrics) forgetTenant(project, id string) {
	match := prometheus.Labels{"tenant": id}
	if m.named {
		match["project"] = project
	}
	m.requests.DeletePartialMatch(match)
	m.latency.DeletePartialMatch(match)
}

// watchConnections exports the open connections of l and those refused.
func (m *promMetrics) watchConnections(l *limitListener) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "eventstore_http_open_connections", Help: "HTTP connections open now.",
		}, func() float64 { return float64(l.open.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "eventstore_http_rejected_connections_total", Help: "Connections refused with 503 because -max-conns were open.",
		}, func() float64 { return float64(l.rejected.Load()) }),
	)
}

// watchProjections exports each projection's lag, read at scrape time
// (at most every lagCacheFor), of every project that projects returns.
// With named set, the series carry a project label.
func (m *promMetrics) watchProjections(projects func() []*project, named bool, log *slog.Logger) {
	desc := lagDesc
	if named {
		desc = projectLagDesc
	}
	feedDesc := feedLagDesc
	if named {
		feedDesc = projectFeedLagDesc
	}
	m.reg.MustRegister(&lagCollector{projects: projects, desc: desc, feedDesc: feedDesc, named: named, log: log})
}

const feedLagHelp = "PostgreSQL only: feed positions committed that feed readers cannot see yet, because an older append is still in flight. Normally 0 or briefly small; a value that stays up points at a stuck append transaction (see docs/appends-side-by-side.md)."

var (
	feedLagDesc        = prometheus.NewDesc("eventstore_feed_lag", feedLagHelp, nil, nil)
	projectFeedLagDesc = prometheus.NewDesc("eventstore_feed_lag", feedLagHelp, []string{"project"}, nil)
)

const lagHelp = "Feed positions between a projection's checkpoint and the head of the store's feed while events of the projection's own feed are stored after its checkpoint, else 0: an upper bound of the events it has still to apply."

var (
	lagDesc        = prometheus.NewDesc("eventstore_projection_lag", lagHelp, []string{"projection", "tenant"}, nil)
	projectLagDesc = prometheus.NewDesc("eventstore_projection_lag", lagHelp, []string{"project", "projection", "tenant"}, nil)
)

// lagSample is one projection's lag in a project's default data space
// (tenant "") or in one of its open tenants.
type lagSample struct {
	project, projection, tenant string
	behind                      int64
}

// lagCollector reads the projections overviews when scraped.
type lagCollector struct {
	projects func() []*project
	desc     *prometheus.Desc
	feedDesc *prometheus.Desc
	named    bool
	log      *slog.Logger

	mu       sync.Mutex
	at       time.Time
	last     []lagSample
	lastFeed []lagSample // behind is the feed lag of the project's default data space
}

// Describe implements prometheus.Collector.
func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.feedDesc
}

// Collect implements prometheus.Collector: every project's lags, read
// again when the last read is older than lagCacheFor.
func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) > lagCacheFor {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var samples, feeds []lagSample
		var failed error
		for _, p := range c.projects() {
			if p.pg != nil {
				lag, err := postgres.FeedLag(ctx, p.pg)
				if err != nil {
					failed = err
					break
				}
				feeds = append(feeds, lagSample{project: p.name, behind: lag})
			}
			st, err := p.proj.Statuses(ctx)
			if err != nil {
				failed = err
				break
			}
			for _, s := range st {
				samples = append(samples, lagSample{project: p.name, projection: s.Definition.Name, behind: s.Behind})
			}
			// Open tenants only: one not opened since the start has no
			// projector running, and a scrape opens none.
			p.tenants.EachOpen(func(id string, tp *eventstore.Projector) {
				if failed != nil {
					return
				}
				st, err := tp.Statuses(ctx)
				if err != nil {
					failed = fmt.Errorf("tenant %s: %w", id, err)
					return
				}
				for _, s := range st {
					samples = append(samples, lagSample{project: p.name, projection: s.Definition.Name, tenant: id, behind: s.Behind})
				}
			})
			if failed != nil {
				break
			}
		}
		cancel()
		if failed != nil {
			c.log.Warn("metrics: projections overview", "err", failed)
		} else {
			c.last, c.lastFeed, c.at = samples, feeds, time.Now()
		}
	}
	for _, s := range c.last {
		labels := []string{s.projection, s.tenant}
		if c.named {
			labels = []string{s.project, s.projection, s.tenant}
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(s.behind), labels...)
	}
	for _, s := range c.lastFeed {
		var labels []string
		if c.named {
			labels = []string{s.project}
		}
		ch <- prometheus.MustNewConstMetric(c.feedDesc, prometheus.GaugeValue, float64(s.behind), labels...)
	}
}

// metricsHandler serves the registry. With authorized set, requests must
// pass it (the /metrics of the API address: a project's key pair);
// otherwise it is served on its own address, where whoever reaches it may
// read it.
func (m *promMetrics) metricsHandler(authorized func(*http.Request) bool) http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	if authorized == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !authorized(r) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"code":"unauthorized","message":"missing or wrong ` +
				httpapi.HeaderAccessKey + " / " + httpapi.HeaderSecretAccessKey + `"}` + "\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// withMetricsPath serves GET /metrics with metrics and everything else
// with api.
func withMetricsPath(api, metrics http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			metrics.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// requestLogger returns an Observer that logs one line per request: no
// path (it holds ids), query, header or body, only the route pattern.
func requestLogger(log *slog.Logger) func(httpapi.RequestInfo) {
	return func(ri httpapi.RequestInfo) {
		attrs := []slog.Attr{
			slog.String("method", ri.Method), slog.String("route", ri.Route), slog.Int("status", ri.Status),
			slog.Int64("bytes", ri.Bytes), slog.Float64("ms", float64(ri.Duration.Microseconds())/1000),
			slog.String("request_id", ri.RequestID),
		}
		if ri.Tenant != "" {
			attrs = append(attrs, slog.String("tenant", ri.Tenant))
		}
		if ri.Aborted {
			attrs = append(attrs, slog.Bool("aborted", true))
		}
		log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
	}
}

// observers combines the Observers that are not nil.
func observers(fns ...func(httpapi.RequestInfo)) func(httpapi.RequestInfo) {
	var use []func(httpapi.RequestInfo)
	for _, f := range fns {
		if f != nil {
			use = append(use, f)
		}
	}
	return func(ri httpapi.RequestInfo) {
		for _, f := range use {
			f(ri)
		}
	}
}
