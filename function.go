package eventstore

// External projection functions: a handler with a FunctionURI hands each
// event and the instance's state to a FunctionCaller (package extfunc
// POSTs them over HTTP) and takes the new state back.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"

	"github.com/eventkit-go/eventstore/internal/lang"
)

// FunctionCaller runs the handlers' FunctionURIs, such as package
// extfunc's Caller over HTTP. It must be safe for concurrent use.
type FunctionCaller interface {
	// CheckURI says why uri may not be called (Create and Put quote it).
	CheckURI(ctx context.Context, uri string) error
	// CallFunction folds one event into an instance; an error is the
	// event's recorded error, shown to API users, and changes nothing.
	CallFunction(ctx context.Context, call FunctionCall) (FunctionResult, error)
}

// FunctionCall is one event for an external function.
type FunctionCall struct {
	URI, Projection string
	Secret          string          // keys the signature: SigningSecret, else Projection
	Body            json.RawMessage // {"metadata","currentState","event"}, as the README says
	Event           *Event          // read only
}

// FunctionResult is an external function's answer: the instance's new
// State, a JSON object stored as written; a Reference (a JSON string or
// number, null to clear, nil to keep); or Delete.
type FunctionResult struct {
	State, Reference json.RawMessage
	Delete           bool
}

// maxSecretBytes bounds Definition.SigningSecret, maxURIBytes a
// FunctionURI.
const (
	maxSecretBytes = 512
	maxURIBytes    = 2048
)

// checkFunctionURI checks the form of handler h's FunctionURI; its scheme
// and whether it may be called are the FunctionCaller's to say
// (Projector.checkFunctions).
func checkFunctionURI(v *validation, hf string, h Handler) {
	if len(h.Functions) > 0 {
		v.add(hf+".functions", "must not be given with functionUri: a handler has one or the other")
	}
	switch u, err := url.Parse(h.FunctionURI); {
	case len(h.FunctionURI) > maxURIBytes:
		v.add(hf+".functionUri", "is longer than %d bytes", maxURIBytes)
	case err != nil || u.Scheme == "":
		v.add(hf+".functionUri", "must be an absolute URI, such as https://fn.example.com/fold")
	case u.User != nil:
		v.add(hf+".functionUri", "must not hold credentials")
	}
}

// storedSpec is the stored form of a definition: its JSON form and the
// signing secret, which the JSON form leaves out.
type storedSpec struct {
	Definition
	Secret string `json:"signingSecret,omitempty"`
	// Resets counts this store's resets of the projection (Reset);
	// Applied is the highest Definition.Resets a Put applied.
	Resets  int64 `json:"resets,omitempty"`
	Applied int64 `json:"appliedResets,omitempty"`
}

// withoutResets returns d with Resets 0: a compiled definition's spec
// carries no counts, a stored one carries them beside it (specWith).
func withoutResets(d Definition) Definition {
	d.resets = 0
	return d
}

// specWith returns c's spec with the reset counts a stored definition
// keeps.
func specWith(c *compiled, resets, applied int64) []byte {
	if resets == 0 && applied == 0 {
		return c.spec
	}
	b, err := json.Marshal(storedSpec{Definition: withoutResets(c.def), Secret: c.def.SigningSecret, Resets: resets, Applied: applied})
	if err != nil {
		return c.spec // c.spec encoded the same definition: unreachable
	}
	return b
}

// specCounts returns the reset counts of a stored spec.
func specCounts(spec []byte) (resets, applied int64) {
	var s struct {
		Resets  int64 `json:"resets"`
		Applied int64 `json:"appliedResets"`
	}
	_ = json.Unmarshal(spec, &s) // an unreadable spec counts none
	return s.Resets, s.Applied
}

// decodeSpec reads a stored spec.
func decodeSpec(spec []byte) (Definition, error) {
	var s storedSpec
	if err := json.Unmarshal(spec, &s); err != nil {
		return Definition{}, err
	}
	s.Definition.SigningSecret = s.Secret
	s.Definition.resets = s.Resets
	return s.Definition, nil
}

// external reports whether some handler of c calls an external function.
func (c *compiled) external() bool { return c.ext }

// checkFunctions checks with the FunctionCaller that every FunctionURI of
// c may be called.
func (p *Projector) checkFunctions(ctx context.Context, op string, c *compiled) error {
	v := validation{op: op}
	for i, h := range c.def.Handlers {
		switch {
		case h.FunctionURI == "":
		case p.functions == nil:
			v.add(fmt.Sprintf("handlers[%d].functionUri", i), "external functions are not enabled in this store")
		default:
			if err := p.functions.CheckURI(ctx, h.FunctionURI); err != nil {
				v.add(fmt.Sprintf("handlers[%d].functionUri", i), "%s", sanitizeMessage(err.Error()))
			}
		}
	}
	return v.err()
}

// callFunction applies event e to instance in through h's external
// function, whole or not at all.
func (p *Projector) callFunction(ctx context.Context, c *compiled, h *chandler, e *Event, in *lang.Instance) error {
	if p.functions == nil {
		return errors.New("external functions are not enabled in this process (ProjectorOptions.Functions)")
	}
	secret := c.def.SigningSecret
	if secret == "" {
		secret = c.def.Name
	}
	return in.CallFunction(e, c.def.Name, c.def.Aggregated, p.maxInstance, func(body []byte) (lang.Answer, error) {
		res, err := p.functions.CallFunction(ctx, FunctionCall{URI: h.uri, Projection: c.def.Name, Secret: secret, Event: e, Body: body})
		return lang.Answer(res), err
	})
}

// catchUpApart starts catching up the stored definition name in a
// goroutine of its own when it calls external functions, unless one runs
// already, and reports whether it is caught up that way. Run uses it so
// that a slow function endpoint holds back its own projection only, not
// the rounds that keep the others current; when the goroutine has made
// progress it wakes Run, since saves may have come meanwhile.
func (p *Projector) catchUpApart(ctx context.Context, name string, apart *sync.WaitGroup) bool {
	pr, err := p.lookupStored(ctx, name)
	if err != nil || !pr.c.Load().external() {
		return false
	}
	p.mu.Lock()
	if p.busy[name] {
		p.mu.Unlock()
		return true
	}
	p.busy[name] = true
	p.mu.Unlock()
	apart.Go(func() {
		before := pr.checkpoint.Load()
		err := p.catchUpStored(ctx, name, nil)
		p.mu.Lock()
		delete(p.busy, name)
		p.mu.Unlock()
		if err != nil && ctx.Err() == nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrClosed) {
			p.log.Warn("eventstore: projector", "err", err)
		}
		if pr.checkpoint.Load() > before {
			p.wake()
		}
	})
	return true
}
