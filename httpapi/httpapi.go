// Package httpapi serves an eventstore.Store and its Projector over HTTP:
// the endpoints of the event store interface.
//
//	POST   /aggregates/{type}/{id}/events      save events (200, empty body)
//	POST   /aggregates/{type}/events           save several aggregates' batches atomically
//	GET    /aggregates/{type}/{id}             load an aggregate (?since=&limit=)
//	HEAD   /aggregates/{type}/{id}             does it exist (200 or 404)
//	DELETE /aggregates/{type}/{id}             delete an aggregate (two steps)
//	GET    /aggregates/{type}                  list a type's aggregates (?skip=&limit=)
//	DELETE /aggregates/{type}                  delete every aggregate of a type (two steps)
//	GET    /feeds                              the feeds, with counts
//	GET    /feeds/{type}, GET /feeds/_all      read a feed (long poll with waitTime)
//	HEAD   /feeds/{type}, HEAD /feeds/_all     a feed's current sequence number
//	POST   /projections/definitions            create a projection definition
//	GET    /projections/definitions            list the definitions
//	GET    /projections/definitions/{name}     read a definition
//	PUT    /projections/definitions/{name}     create or replace a definition (rebuilt from history)
//	DELETE /projections/definitions/{name}     delete a definition with its instances
//	GET    /projections/single/{name}/{id}     query a single projection instance
//	GET    /projections/single/{name}          list instances (?skip=&limit=&sort=&reference=&from=&to=&id=&search=)
//	GET    /projections/single/{name}/_count   count instances (?reference=&search=)
//	DELETE /projections/single/{name}          reset a single projection (rebuilt from the feed)
//	GET    /projections/aggregated/{name}      query an aggregated projection
//	DELETE /projections/aggregated/{name}      reset an aggregated projection
//	GET    /projections                        every projection's progress and recent errors
//	GET    /tenants                            the project's tenants (with Options.Tenants)
//	POST   /tenants                            add a tenant
//	PUT    /tenants/{tenantId}                 change a tenant's reference
//	DELETE /tenants/{tenantId}                 delete a tenant with all its data
//	GET    /openapi.json                       the OpenAPI 3.1 document of every endpoint
//	GET    /status                             version, storage, readiness and the recent save rate
//	GET    /console/                           the console, a page for browsers (without credentials)
//	GET    /healthz, GET /readyz               health checks, without credentials
//
// New returns a plain http.Handler with no global state: mount it at the
// root of a server, or under a prefix of an application's mux with
// http.StripPrefix:
//
//	mux.Handle("/es/", http.StripPrefix("/es", httpapi.New(st, p, opts)))
//
// # Authentication
//
// Every request must carry the headers Service-Access-Key and
// Service-Secret-Access-Key holding one of the configured KeyPairs, or the
// same pair in the headers the official clients send, Serialized-Access-Key
// and Serialized-Secret-Access-Key. They are checked in constant time before
// anything else happens; a missing, empty, repeated or wrong header, or a
// request mixing the two spellings, is answered with 401 and nothing is read
// or written. An application that mounts the handler may decide itself
// instead, with Options.Authorize (its own sessions or tokens, or no check
// at all behind its own gate).
//
// # Requests
//
// Request bodies must be JSON with Content-Type application/json (a charset
// parameter, if any, must be utf-8); any other content type is answered with
// 415. Bodies larger than Options.MaxBodyBytes are answered with 413.
// An unknown field, or a known field without the documented JSON type, is
// answered with 422 and one errors[] entry per problem (an unknown field's
// entry names the likely spelling). Bodies are checked in one pass without recursion and may nest 256
// levels (event data limits.MaxDataDepth); arrays are counted before
// they are decoded: more than limits.MaxEventsPerSave events, 1,000
// handlers or 100 functions per handler are answered with 422. Event data
// is stored exactly as it appears in the body and never re-encoded through
// float64; a load returns it compacted (insignificant whitespace removed).
//
// The save body is
//
//	{"events": [{"eventId": "<uuid>", "eventType": "...", "data": {...}}],
//	 "expectedVersion": 3, "aggregateId": "<id>"}
//
// where expectedVersion (optional) makes the save fail with 409 unless the
// aggregate is at that version (0: it must not exist yet), and aggregateId
// (optional) must equal the id in the path. An event may also carry
// "encryptedData", an opaque string of at most 65,535 bytes that is
// returned unchanged in loads and feeds.
//
// POST /aggregates/{type}/events saves batches of several aggregates of
// the type in one atomic step:
//
//	{"batches": [{"aggregateId": "a-1", "events": [...], "expectedVersion": 3}, ...]}
//
// All batches are stored, or none: a conflict in one batch is answered with
// 409 naming that batch and its aggregate. At most 1,000 batches and
// 10,000 events in all. A body mixing this form with the single form, an
// empty batch, or the same aggregate in two batches is 422. The single
// form {"aggregateId": "...", "events": [...]} is accepted on this path
// too.
//
// # Loads
//
// GET /aggregates/{type}/{id} returns the versions after since (default 0)
// up to limit versions (default and maximum 1,000), with "hasMore" when
// later versions exist; aggregateVersion is always the current version.
//
// GET /aggregates/{type} lists the type's aggregates by id (byte order),
// without their events:
//
//	{"aggregates": [{"aggregateId", "aggregateVersion", "createdAt", "updatedAt"}],
//	 "hasMore": false, "totalCount": 3}
//
// where createdAt and updatedAt are the times of the aggregate's first and
// last saves, in milliseconds since the Unix epoch, and totalCount counts
// every aggregate of the type. skip (default 0, at most 2^30) and limit
// (default 100, at most 1,000) page the list. A type without aggregates
// (none saved, or all deleted) is 404, as its feed is.
//
// # Feeds
//
// A feed is one aggregate type's saved batches, in order; _all is every
// type's. GET /feeds lists the feeds:
//
//	{"feeds": [{"aggregateType", "aggregateCount", "batchCount", "eventCount"}]}
//
// GET /feeds/{type} and GET /feeds/_all answer
//
//	{"entries": [{"sequenceNumber", "aggregateId", "aggregateType", "feedName",
//	              "timestamp", "events": [...]}],
//	 "hasMore": false, "currentSequenceNumber": 12}
//
// where an entry is one saved batch, events are as in a load and timestamp
// is in milliseconds since the epoch. A type's feed numbers its batches
// by FeedSequence, _all by global position: both strictly increasing and
// never reused, but possibly with gaps, so a client sends back as since
// only a number it was given. Parameters: since (exclusive, default 0), limit (entries,
// default 100, at most 1,000), waitTime (milliseconds, at most 60,000:
// when no entry after since exists, wait for one that long; the answer
// comes as soon as one is saved, or empty), filterType (repeatable, only
// on _all: keep those types), partitionCount and partitionNumber (given
// together; keep the entries whose FNV-1a-32 hash of the aggregate id
// modulo partitionCount, at most 1,000, is partitionNumber, from 0), from
// and to (keep the entries recorded within [from, to], both inclusive:
// each an RFC 3339 date-time with an offset, such as
// 2026-11-01T10:00:00Z, or a date, which as from means the start of that
// day in UTC and as to its end, so from=2026-11-01&to=2026-11-01 is that
// whole day; either alone leaves the other side open; years 1 to 9999;
// from after to is 400). Every filter combines with since and limit:
// hasMore says whether entries after the last returned one pass the
// filters, and since = the last sequenceNumber reads on.
// currentSequenceNumber is the head of the unfiltered feed, whatever since
// is. A since past the head (a number the feed never gave, or one given by
// a store that has since lost its latest events) is 409 cursor_ahead at
// once, with the head in the Serialized-SequenceNumber-Current header,
// instead of a long poll for a number the feed may never reach. A feed
// with no events is 404 (_all never is). HEAD answers 200 with the head in the
// Serialized-SequenceNumber-Current header. At most Options.MaxLongPolls
// reads wait at once; others are answered at once.
//
// # Deletion
//
// DELETE /aggregates/{type}/{id} and DELETE /aggregates/{type} answer 200
// {"deleteToken": "..."}; the same call with ?deleteToken=... within 10
// minutes deletes and answers 204. A wrong, expired or foreign token (one
// issued for something else) is 403 and nothing is deleted. Tokens are
// signed, not stored: see Options.DeleteTokenKey. Deleted events disappear
// from loads, feeds and projections, and the id can be used again.
//
// # Responses
//
// Every JSON response carries Content-Type application/json, Content-Length
// and Vary: Accept-Encoding, and its body ends with a newline; bodies of
// 1 KiB or more are gzip-compressed when the request's Accept-Encoding
// allows it. Load and feed answers larger than Options.MaxResponseBuffer
// are the exception: they are read from the store in parts and streamed
// (chunked, without Content-Length), so that a client that reads slowly
// holds little memory; should the store fail half way, the connection is
// cut rather than the body completed.
//
// # Operations
//
// GET /healthz answers 200 {"status":"ok"} while the process serves. GET
// /readyz answers the same when the storage answers within 2 s, is not out
// of space (eventstore.Store.OutOfSpace) and the Projector's Run is
// running, else 503 {"code":"unavailable","message":"not ready"} (with
// ": the store is out of space" when it is). Neither needs credentials nor says more. Options.Observer
// receives one RequestInfo per request (route pattern, status, bytes,
// duration, request id) for logs and metrics. A 401 closes the connection. A save answers 200 with an empty body. Creating a definition answers 200 with the stored definition
// as JSON. A load answers
//
//	{"aggregateId", "aggregateType", "aggregateVersion",
//	 "events": [{"eventId", "eventType", "data", "version", "sequence",
//	             "position", "recordedAt"}]}
//
// where data is omitted for events saved without it and recordedAt is in
// milliseconds since the Unix epoch. A projection query answers
//
//	{"projectionId": "...", "updatedAt": <ms since the epoch>, "data": {...}}
//
// with an ETag that changes whenever the projection does, and Last-Modified.
// A request whose If-None-Match matches the ETag (weak comparison, lists
// and * allowed) is answered with 304 and no body. If-Modified-Since is not
// used: Last-Modified has one-second resolution, the ETag does not.
//
// A definition's indexedFields (paths into the instance, such as
// $.projection.customer.name or customer.name) make its instances
// searchable: search=TEXT on the list and its _count keeps the instances
// of which every word of TEXT starts a word of an indexed field, ignoring
// case, and combines with the other parameters (eventstore.ListOptions.Search
// says what a word is). A search longer than limits.MaxSearchBytes, of
// more than limits.MaxSearchWords words, without a word, given twice,
// or of a projection without indexedFields is answered with 400 naming
// search.
//
// # Errors
//
// Every error is answered with one shape,
//
//	{"code": "...", "message": "...", "errors": [{"field", "message"}], "requestId": "..."}
//
// built by one table (errorTable) from the library's sentinel errors and
// this package's own. message is one line in the API's words, made from the
// request (the aggregate, feed or projection it names), never a Go error
// chain or a backend's text; with several problems it counts them and
// errors lists each once (at most limits.MaxFieldErrors; "omitted"
// counts the rest). errors is always an array. code is a stable word per
// status, kept for programs to switch on. requestId repeats the
// X-Request-Id header that every response carries: the request's own when
// it is sane, else a new one (see RequestID). 5xx answers have a generic
// message with that id, and the full error is logged with it.
// JSONErrorListener gives the errors net/http writes by itself the same
// shape. The statuses:
//
//	400 malformed               JSON that does not parse (line, column, byte),
//	                            a bad path segment or query parameter
//	400 unsupported             a tenant header without Options.Tenants, or on
//	                            definitions or the tenants API
//	400 unknown_tenant          a tenant header naming no live tenant
//	401 unauthorized            missing, empty, mixed or wrong key headers
//	403 forbidden               wrong, expired or foreign deleteToken
//	404 not_found               unknown path, aggregate, projection or instance
//	405 method_not_allowed      with an Allow header
//	409 conflict                expectedVersion mismatch, a retried batch mixing
//	                            stored and new event ids, a duplicate definition
//	413 too_large               body over Options.MaxBodyBytes
//	415 unsupported_media_type  Content-Type is not application/json
//	422 invalid                 well-formed JSON with invalid content or unknown fields
//	500 internal                anything unexpected; details are only logged
//	503 unavailable             storage unreachable (with Retry-After) or closed;
//	                            for a save, the outcome is unknown: retry it
//	                            with the same event ids
//	507 insufficient_storage    the storage is out of space; nothing stored
//
// GET /openapi.json serves OpenAPI, the OpenAPI 3.1 document of every
// endpoint.
package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/safetext"
	"github.com/eventkit-go/eventstore/internal/tracing"
	"github.com/eventkit-go/eventstore/reactions"
	"go.opentelemetry.io/otel/trace"
)

// Header names of the credentials every request carries. A request uses
// one spelling for both: HeaderAccessKey and HeaderSecretAccessKey (the
// interface's), or HeaderSerializedAccessKey and
// HeaderSerializedSecretAccessKey (what the official clients send).
const (
	HeaderAccessKey                 = "Service-Access-Key"
	HeaderSecretAccessKey           = "Service-Secret-Access-Key"
	HeaderSerializedAccessKey       = "Serialized-Access-Key"
	HeaderSerializedSecretAccessKey = "Serialized-Secret-Access-Key"
)

// HeaderTenantID is the header of the hosted service's multi-tenancy (see
// Options.Tenants); HeaderServiceTenantID is its other spelling. Without
// Options.Tenants the handler has one tenant and a request carrying either
// is answered with 400 (not 404, which a client's exists would read as "no
// such aggregate").
const HeaderTenantID = "Serialized-Tenant-Id"

// DefaultMaxBodyBytes is the request body limit used when
// Options.MaxBodyBytes is zero: 4 MiB.
const DefaultMaxBodyBytes = 4 << 20

// Options configures the handler returned by New.
type Options struct {
	// Keys are the accepted credential pairs. A request is served when its
	// two headers equal one of them. With no keys (or only pairs with an
	// empty field, which never match) and no Authorize, every request is
	// answered with 401, whose message says that no key is configured.
	Keys []KeyPair
	// Authorize, when set, decides instead of Keys whether a request is
	// served (true) or answered 401: an application that mounts the
	// handler plugs in its own authentication here (a session, a token,
	// mTLS). func(*http.Request) bool { return true } turns the check off,
	// for a handler that something in front of it already protects. The
	// health endpoints never ask it.
	Authorize func(r *http.Request) bool
	// MaxBodyBytes limits request bodies; larger ones are answered with
	// 413. Zero or negative means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Logger receives request errors: 5xx with their details at Error
	// level, with the request id their answer names, and panics with
	// their stack. The default is slog.Default().
	Logger *slog.Logger
	// DeleteTokenKey is the key that signs delete tokens. Handlers that
	// share it (several server instances behind one address) accept each
	// other's tokens. Empty means a random key per handler.
	DeleteTokenKey []byte
	// MaxLongPolls bounds the feed reads that wait (waitTime) at once;
	// reads beyond it are answered at once, as if waitTime were 0. Zero
	// means DefaultMaxLongPolls.
	MaxLongPolls int
	// MaxResponseBuffer bounds the bytes of a load or feed answer held in
	// memory: a larger answer is read from the store in parts and
	// streamed, without Content-Length. Zero or negative means
	// DefaultMaxResponseBuffer.
	MaxResponseBuffer int
	// Observer, when set, is called once per request after it is served
	// (see RequestInfo), for request logs and metrics. It must be safe for
	// concurrent use.
	Observer func(RequestInfo)
	// Tenants, when set, serves the tenants of the project: the tenants
	// API (/tenants), and requests to aggregates, feeds and projection
	// queries that carry HeaderTenantID (or HeaderServiceTenantID), which
	// are served with the tenant's Store and Projector. Definitions and the
	// tenants API refuse the header. An unknown or deleted tenant is
	// answered with 400 (code unknown_tenant), a malformed id with 400
	// (malformed). Definition changes are passed on with
	// Tenants.DefinitionChanged. Without Tenants the tenants API and the
	// header are answered with 400 (unsupported).
	Tenants Tenants
	// Reactions, when set, serves the reactions API (/reactions) with this
	// Engine for the default data space, and removes an aggregate's or a
	// type's reactions when its events are deleted. With a tenant header
	// the reactions of the tenant are served when Tenants implements
	// TenantReactions (a *tenancy.Set made with Options.Reactions set to
	// this Engine), else the request is answered with 400 (unsupported);
	// reaction definitions are shared and refuse the header. Without it
	// /reactions answers 404. The handler does not run the Engine: call
	// its Run.
	Reactions *reactions.Engine
	// DisableConsole turns off the console, the browser page served
	// without credentials at /console/ (see Console): the handler then
	// answers that path with 404 like any unknown one.
	DisableConsole bool
	// Version names the server's version in GET /status. Empty means this
	// library's module version from the binary's build information.
	Version string
	// StorageName names the storage backend in GET /status, such as
	// "sqlite", "postgres" or "memory"; empty leaves it out.
	StorageName string
	// TracerProvider receives a server span per request, which continues
	// the caller's trace when the request carries a W3C traceparent
	// header (docs/tracing.md). Nil follows OpenTelemetry's global
	// provider, which traces nothing until the program installs one.
	TracerProvider trace.TracerProvider
}

// KeyPair is one accepted pair of credentials.
type KeyPair struct {
	// AccessKey is expected in the Service-Access-Key header (or
	// Serialized-Access-Key).
	AccessKey string
	// SecretAccessKey is expected in the Service-Secret-Access-Key header
	// (or Serialized-Secret-Access-Key).
	SecretAccessKey string
}

// keyHash is a KeyPair hashed to a fixed length, so that comparing it does
// not reveal the configured lengths.
type keyHash struct {
	access, secret [sha256.Size]byte
}

// handler serves the five endpoints.
type handler struct {
	st      *eventstore.Store
	p       *eventstore.Projector
	keys    []keyHash
	maxBody int64
	log     *slog.Logger
	mux     *http.ServeMux
	gzips   sync.Pool // *gzip.Writer
	bufs    sync.Pool // *[]byte: response bodies
	tokens  *deleteTokens
	polls   chan struct{} // a slot per waiting long poll

	maxResponse int
	observe     func(RequestInfo)
	authorize   func(*http.Request) bool
	tenants     Tenants
	reactions   *reactions.Engine
	console     bool     // serve /console/
	saves       saveRate // the saves served, for GET /status
	version     string
	storageName string
	tracer      *tracing.Tracer // spans of requests (trace.go)
}

// New returns an http.Handler serving st and p. Both must be non-nil; New
// panics otherwise. The handler holds no global state; several may serve
// different stores in one process.
func New(st *eventstore.Store, p *eventstore.Projector, opts *Options) http.Handler {
	if st == nil || p == nil {
		panic("httpapi: New needs a non-nil Store and Projector")
	}
	if opts == nil {
		opts = &Options{}
	}
	h := &handler{st: st, p: p, maxBody: opts.MaxBodyBytes, log: opts.Logger, tokens: newDeleteTokens(opts.DeleteTokenKey)}
	maxPolls := opts.MaxLongPolls
	if maxPolls <= 0 {
		maxPolls = DefaultMaxLongPolls
	}
	h.polls = make(chan struct{}, maxPolls)
	h.maxResponse, h.observe = opts.MaxResponseBuffer, opts.Observer
	if h.maxResponse <= 0 {
		h.maxResponse = DefaultMaxResponseBuffer
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.authorize = opts.Authorize
	h.tenants = opts.Tenants
	h.reactions = opts.Reactions
	h.console = !opts.DisableConsole
	h.version, h.storageName = opts.Version, opts.StorageName
	if h.version == "" {
		h.version = moduleVersion()
	}
	h.tracer = tracing.New(opts.TracerProvider)
	for _, k := range opts.Keys {
		if k.AccessKey == "" || k.SecretAccessKey == "" {
			continue
		}
		h.keys = append(h.keys, keyHash{sha256.Sum256([]byte(k.AccessKey)), sha256.Sum256([]byte(k.SecretAccessKey))})
	}
	// Patterns carry no method: the std mux would answer a wrong method
	// with a plain-text 405, so each route checks the method itself.
	mux := http.NewServeMux()
	for _, rt := range h.routes() {
		mux.HandleFunc(muxPattern(rt.pattern), h.methods(rt.methods...))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, apiErr(eventstore.ErrNotFound, "no endpoint at %s", clip(r.URL.Path)))
	})
	h.mux = mux
	return h
}

// serve authenticates the request, rejects unclean paths and routes it.
func (h *handler) serve(w http.ResponseWriter, r *http.Request) {
	defer h.recoverPanic(w, r)
	switch {
	case h.authorize != nil:
		if !h.authorize(r) {
			h.fail(w, r, errUnauthorized)
			return
		}
	case len(h.keys) == 0:
		h.fail(w, r, apiErr(errUnauthorized, "this server has no key pair configured (httpapi.Options.Keys or Options.Authorize), so it refuses every request"))
		return
	case !h.authorized(r):
		h.fail(w, r, errUnauthorized)
		return
	}
	// The mux would redirect a path with empty, "." or ".." segments to
	// its cleaned form, which may name another endpoint: refuse it.
	if msg := uncleanPath(r.URL.EscapedPath()); msg != "" {
		h.fail(w, r, &pathError{msg: msg})
		return
	}
	// A request for a tenant must never be answered with another's data,
	// nor with the project's default data space.
	switch id, ok, err := tenantHeader(r); {
	case err != nil:
		h.fail(w, r, err)
	case ok:
		h.serveTenant(w, r, id)
	default:
		h.mux.ServeHTTP(w, r)
	}
}

// credentials returns the key pair a request carries, in one spelling of
// the headers. ok is false when a header is missing, empty or repeated,
// or when the request mixes the two spellings.
func credentials(r *http.Request) (access, secret string, ok bool) {
	one := func(name string) (string, bool, bool) { // value, present, usable
		v, present := r.Header[name]
		return strings.Join(v, ""), present, len(v) == 1 && v[0] != ""
	}
	sa, saIn, saOK := one(HeaderAccessKey)
	ss, ssIn, ssOK := one(HeaderSecretAccessKey)
	ca, caIn, caOK := one(HeaderSerializedAccessKey)
	cs, csIn, csOK := one(HeaderSerializedSecretAccessKey)
	switch {
	case (saIn || ssIn) && (caIn || csIn):
		return "", "", false
	case saIn || ssIn:
		return sa, ss, saOK && ssOK
	default:
		return ca, cs, caOK && csOK
	}
}

// authorized compares the request's credentials with every configured pair
// in constant time, without stopping at the first match.
func (h *handler) authorized(r *http.Request) bool {
	access, secret, ok := credentials(r)
	a := sha256.Sum256([]byte(access))
	s := sha256.Sum256([]byte(secret))
	match := 0
	for i := range h.keys {
		k := &h.keys[i]
		match |= subtle.ConstantTimeCompare(a[:], k.access[:]) & subtle.ConstantTimeCompare(s[:], k.secret[:])
	}
	return match == 1 && ok
}

// recoverPanic turns a panic of an endpoint into a logged 500.
func (h *handler) recoverPanic(w http.ResponseWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	id := w.Header().Get(HeaderRequestID)
	h.log.Error("httpapi: panic serving request", "requestId", id, "method", r.Method, "path", r.URL.Path,
		"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	writeErrorBody(w, http.StatusInternalServerError, errorBody{Code: "internal", Message: "internal error (request id " + id + ")", RequestID: id})
}

// uncleanPath reports an empty, "." or ".." segment of an escaped path, and
// a segment that is an escaped '/' alone (%2F), which the mux cannot route.
// Escaped dots and other escaped slashes reach the endpoints, which check
// the unescaped names with names.Check.
func uncleanPath(p string) string {
	if p == "/" || p == "" {
		return ""
	}
	rest := strings.TrimPrefix(p, "/")
	for i := 0; ; i++ {
		seg, after, more := strings.Cut(rest, "/")
		switch seg {
		case "":
			if !more {
				return "the path ends with a slash: drop it"
			}
			return fmt.Sprintf("path segment %d is empty", i+1)
		case ".", "..":
			return fmt.Sprintf("path segment %d is %q", i+1, seg)
		}
		if strings.EqualFold(seg, "%2F") {
			return fmt.Sprintf("path segment %d must not contain '/'", i+1)
		}
		if !more {
			return ""
		}
		rest = after
	}
}

// clip shortens s for quoting in a message, as eventstore does.
func clip(s string) string {
	return safetext.Clip(s, 64+len(safetext.Ellipsis))
}
