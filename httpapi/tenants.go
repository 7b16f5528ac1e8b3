package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/tenancy"
)

// HeaderServiceTenantID is the interface's spelling of HeaderTenantID. A
// request may carry either, not both.
const HeaderServiceTenantID = "Service-Tenant-Id"

// MaxTenantReferenceLen bounds a tenant's reference, in bytes.
const MaxTenantReferenceLen = 256

// Tenants gives a handler the tenants of its project (Options.Tenants);
// a *tenancy.Set is one. Tenant ids reach its methods as lower-case
// canonical UUIDs, references checked against MaxTenantReferenceLen.
// Errors wrapping tenancy.ErrUnknownTenant, ErrTooManyTenants and
// ErrTenantDeleted are answered with 4xx. Every method must be safe for
// concurrent use.
type Tenants interface {
	// Open returns the Store and Projector of tenant id, with release,
	// which the handler calls once the request is served. It returns an
	// error wrapping tenancy.ErrUnknownTenant for an unknown or deleted tenant.
	Open(ctx context.Context, id string) (st *eventstore.Store, p *eventstore.Projector, release func(), err error)
	// Add adds tenant id; created is false when it already exists. It
	// returns an error wrapping tenancy.ErrTooManyTenants or
	// tenancy.ErrTenantDeleted
	// when it cannot be added.
	Add(ctx context.Context, id, reference string) (created bool, err error)
	// List returns every tenant, deleted ones included, by number.
	List(ctx context.Context) ([]tenancy.Tenant, error)
	// Update changes the reference of tenant id (tenancy.ErrUnknownTenant when
	// there is no such tenant or it is deleted).
	Update(ctx context.Context, id, reference string) error
	// Delete deletes tenant id with all its data (tenancy.ErrUnknownTenant when
	// there is no such tenant or it is deleted).
	Delete(ctx context.Context, id string) error
	// DefinitionChanged is called after the projection definition name
	// was created, replaced or deleted in the project's Projector (reset
	// false), or after its instances were reset there (reset true), so
	// that every tenant's Projector does the same.
	DefinitionChanged(ctx context.Context, name string, reset bool) error
}

// dataKey is the context key of a request's tenant data.
type dataKey struct{}

// tenantData is the Store, Projector and reactions Engine (nil when the
// tenants have none) of the tenant a request names.
type tenantData struct {
	id string
	st *eventstore.Store
	p  *eventstore.Projector
	r  *reactions.Engine
}

// tenantOf returns the tenant id a request is served for, "" for the
// project's default data space.
func tenantOf(r *http.Request) string {
	if d, ok := r.Context().Value(dataKey{}).(*tenantData); ok {
		return d.id
	}
	return ""
}

// store returns the Store that serves r: its tenant's, or the project's.
func (h *handler) store(r *http.Request) *eventstore.Store {
	if d, ok := r.Context().Value(dataKey{}).(*tenantData); ok {
		return d.st
	}
	return h.st
}

// proj returns the Projector that serves r.
func (h *handler) proj(r *http.Request) *eventstore.Projector { return h.projCtx(r.Context()) }

// projCtx returns the Projector of the request whose context is ctx.
func (h *handler) projCtx(ctx context.Context) *eventstore.Projector {
	if d, ok := ctx.Value(dataKey{}).(*tenantData); ok {
		return d.p
	}
	return h.p
}

// definitionChanged passes a change of definition name to the tenants.
func (h *handler) definitionChanged(r *http.Request, name string, reset bool) error {
	if h.tenants == nil {
		return nil
	}
	return h.tenants.DefinitionChanged(r.Context(), name, reset)
}

// tenantHeader returns the tenant id r names, with ok false when it names
// none. A repeated header, both spellings, or a value that is not a UUID
// is an error.
func tenantHeader(r *http.Request) (id string, ok bool, err error) {
	a, aIn := r.Header[HeaderTenantID]
	b, bIn := r.Header[HeaderServiceTenantID]
	switch {
	case !aIn && !bIn:
		return "", false, nil
	case aIn && bIn:
		return "", true, apiErr(errMalformed, "send the tenant id in one header, %s or %s, not both", HeaderTenantID, HeaderServiceTenantID)
	case bIn:
		a = b
	}
	if len(a) != 1 {
		return "", true, apiErr(errMalformed, "the tenant header is repeated: send it once")
	}
	id, valid := canonicalUUID(a[0])
	if !valid {
		return "", true, apiErr(errMalformed, "the tenant id %q is not a UUID (8-4-4-4-12 hexadecimal digits)", clip(a[0]))
	}
	return id, true, nil
}

// canonicalUUID returns s, a UUID in the 8-4-4-4-12 form, in lower case.
func canonicalUUID(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return "", false
			}
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
		default:
			return "", false
		}
	}
	return strings.ToLower(s), true
}

// tenantScoped reports whether the endpoint at path serves a tenant's
// data: aggregates, feeds, projection queries and reactions. Projection
// and reaction definitions and the tenants API are shared by the
// project's tenants.
func tenantScoped(path string) bool {
	switch {
	case strings.HasPrefix(path, "/aggregates/"), path == "/feeds", strings.HasPrefix(path, "/feeds/"),
		strings.HasPrefix(path, "/projections/single/"), strings.HasPrefix(path, "/projections/aggregated/"),
		path == "/projections":
		return true
	case path == "/reactions", strings.HasPrefix(path, "/reactions/") && !strings.HasPrefix(path, "/reactions/definitions"):
		// Served for the tenant when the tenants have reactions, else
		// refused by reactionsOf.
		return true
	}
	return false
}

// serveTenant serves r, which names tenant id, with that tenant's data.
func (h *handler) serveTenant(w http.ResponseWriter, r *http.Request, id string) {
	if h.tenants == nil {
		h.fail(w, r, apiErr(errUnsupported, "tenants are not supported: this server has one tenant; send no %s header (no tenantId option)", HeaderTenantID))
		return
	}
	if !tenantScoped(r.URL.Path) {
		h.fail(w, r, apiErr(errUnsupported, "%s is shared by every tenant of the project: send no %s header (no tenantId option)", clip(r.URL.Path), HeaderTenantID))
		return
	}
	st, p, release, err := h.tenants.Open(r.Context(), id)
	if err != nil {
		if errors.Is(err, tenancy.ErrUnknownTenant) {
			err = apiErr(errUnknownTenant, "no tenant %s in this project (deleted or never added): add it with POST /tenants", id)
		}
		h.fail(w, r, err)
		return
	}
	defer release()
	d := &tenantData{id: id, st: st, p: p}
	if tr, ok := h.tenants.(TenantReactions); ok && h.reactions != nil &&
		(strings.HasPrefix(r.URL.Path, "/reactions") || r.Method == http.MethodDelete) {
		// The reactions API, and deletions, which remove the reactions of
		// what they delete.
		e, release, err := tr.OpenReactions(r.Context(), id)
		switch {
		case err == nil:
			defer release()
			d.r = e
		case !errors.Is(err, reactions.ErrUnsupported):
			h.fail(w, r, err)
			return
		}
	}
	if rc, ok := w.(*recorder); ok {
		rc.tenant = id
	}
	r = r.WithContext(context.WithValue(r.Context(), dataKey{}, d))
	h.mux.ServeHTTP(w, r)
}

// tenantJSON is one tenant of GET /tenants.
type tenantJSON struct {
	TenantID     string `json:"tenantId"`
	TenantNumber string `json:"tenantNumber"`
	AddedAt      int64  `json:"addedAt"`
	Reference    string `json:"reference"`
	Deleted      bool   `json:"deleted"`
}

// tenantsJSON is the body of GET /tenants.
type tenantsJSON struct {
	Tenants []tenantJSON `json:"tenants"`
}

// noTenants answers the tenants API of a handler without Options.Tenants.
func (h *handler) noTenants(w http.ResponseWriter, r *http.Request) bool {
	if h.tenants != nil {
		return false
	}
	h.fail(w, r, apiErr(errUnsupported, "tenants are not supported: this server has one tenant"))
	return true
}

// listTenants serves GET /tenants.
func (h *handler) listTenants(w http.ResponseWriter, r *http.Request) {
	if h.noTenants(w, r) {
		return
	}
	if _, err := parseQuery(r); err != nil {
		h.fail(w, r, err)
		return
	}
	ts, err := h.tenants.List(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := tenantsJSON{Tenants: make([]tenantJSON, len(ts))}
	for i, t := range ts {
		out.Tenants[i] = tenantJSON{TenantID: t.ID, TenantNumber: strconv.FormatInt(t.Number, 10),
			AddedAt: t.AddedAt.UnixMilli(), Reference: t.Reference, Deleted: t.Deleted}
	}
	h.sendValue(w, r, out)
}

// decodeTenant decodes the body of POST /tenants (pathID "": tenantId is
// required) or PUT /tenants/{tenantId} (tenantId, which the official
// client sends, may repeat pathID).
func (h *handler) decodeTenant(w http.ResponseWriter, r *http.Request, pathID string) (id, reference string, err error) {
	body, err := h.readJSON(w, r)
	if err != nil {
		return "", "", err
	}
	fe := &fieldErrors{op: "tenant"}
	root, err := parseBody(body, fe)
	if err != nil {
		return "", "", err
	}
	f := fields(root, "", "a tenant", fe, "reference", "tenantId")
	reference = str(f[0], "", "reference", fe)
	if present(f[1]) && f[1].Type != gjson.String {
		fe.add("tenantId", "must be a string")
	}
	if err := fe.err(); err != nil {
		return "", "", err // unknown fields and wrong types: 422, as for every body
	}
	switch {
	case len(reference) > MaxTenantReferenceLen:
		fe.add("reference", "is longer than %d bytes", MaxTenantReferenceLen)
	case !utf8.ValidString(reference) || strings.IndexFunc(reference, isControl) >= 0:
		fe.add("reference", "must be text without control characters")
	}
	switch v := f[1]; {
	case !present(v) && pathID == "":
		fe.add("tenantId", "is required")
	case !present(v):
		id = pathID
	default:
		var ok bool
		if id, ok = canonicalUUID(v.String()); !ok {
			fe.add("tenantId", "must be a UUID (8-4-4-4-12 hexadecimal digits)")
		} else if pathID != "" && id != pathID {
			fe.add("tenantId", "%s differs from %s in the path", id, pathID)
		}
	}
	if len(fe.fields) > 0 {
		// A bad tenant is 400, as in the service, with the fields named.
		return "", "", &pathError{msg: fe.fields[0].Field + " " + fe.fields[0].Message, fields: fe.fields}
	}
	return id, reference, nil
}

// addTenant serves POST /tenants: 200 when added, 204 when it exists.
func (h *handler) addTenant(w http.ResponseWriter, r *http.Request) {
	id, ref, err := h.decodeTenant(w, r, "")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if h.noTenants(w, r) {
		return
	}
	created, err := h.tenants.Add(r.Context(), id, ref)
	switch {
	case errors.Is(err, tenancy.ErrTooManyTenants):
		h.fail(w, r, apiErr(errForbidden, "%s", err.Error()))
		return
	case errors.Is(err, tenancy.ErrTenantDeleted):
		h.fail(w, r, apiErr(eventstore.ErrConflict, "tenant %s was deleted; the id of a deleted tenant cannot be added again", id))
		return
	case err != nil:
		h.fail(w, r, err)
		return
	case !created:
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.send(w, r, nil, false)
}

// tenantPathID returns the tenant id of the path, or an error.
func tenantPathID(r *http.Request) (string, error) {
	seg, err := segments(r, "tenantId")
	if err != nil {
		return "", err
	}
	id, ok := canonicalUUID(seg[0])
	if !ok {
		return "", &pathError{msg: "the tenant id " + strconv.Quote(clip(seg[0])) + " is not a UUID (8-4-4-4-12 hexadecimal digits)"}
	}
	return id, nil
}

// updateTenant serves PUT /tenants/{tenantId}.
func (h *handler) updateTenant(w http.ResponseWriter, r *http.Request) {
	id, err := tenantPathID(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	_, ref, err := h.decodeTenant(w, r, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if h.noTenants(w, r) {
		return
	}
	if err := h.tenants.Update(r.Context(), id, ref); err != nil {
		h.fail(w, r, tenantNotFound(id, err))
		return
	}
	h.send(w, r, nil, false)
}

// deleteTenant serves DELETE /tenants/{tenantId}.
func (h *handler) deleteTenant(w http.ResponseWriter, r *http.Request) {
	if h.noTenants(w, r) {
		return
	}
	id, err := tenantPathID(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if _, err := parseQuery(r); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.tenants.Delete(r.Context(), id); err != nil {
		h.fail(w, r, tenantNotFound(id, err))
		return
	}
	h.send(w, r, nil, false)
}

// tenantNotFound turns ErrUnknownTenant of the tenants API into a 404.
func tenantNotFound(id string, err error) error {
	if errors.Is(err, tenancy.ErrUnknownTenant) {
		return apiErr(eventstore.ErrNotFound, "no tenant %s in this project (deleted or never added)", id)
	}
	return err
}

// A *tenancy.Set serves both interfaces.
var (
	_ Tenants         = (*tenancy.Set)(nil)
	_ TenantReactions = (*tenancy.Set)(nil)
)
