// Package lang is the projection language of package eventstore: it
// compiles a definition's functions (selectors, filters, the function
// table) and applies events to projection instances, each held as a
// decoded JSON tree for a page of events and encoded once at the commit.
// Package eventstore keeps the user's types (Definition, Handler,
// Function) and checks the rest of a definition; docs/projections.md
// describes the language.
package lang

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/eventkit-go/eventstore/internal/limits"
)

// Problems collects what compiling finds wrong, each problem naming the
// field of the definition it concerns, such as
// "handlers[0].functions[1].targetSelector".
type Problems interface {
	Add(field, format string, args ...any)
}

// problems counts the problems added to p.
type problems struct {
	p Problems
	n int
}

func (v *problems) add(field, format string, args ...any) {
	v.n++
	v.p.Add(field, format, args...)
}

// Function is one function of a handler as written, the fields of
// eventstore.Function (which converts to it).
type Function struct {
	Name           string
	TargetSelector string
	TargetFilter   string
	EventSelector  string
	EventFilter    string
	RawData        json.RawMessage
}

// maxRawData bounds a function's rawData.
const maxRawData = 64 << 10

// CompileFunction compiles f, the function at field (such as
// "handlers[0].functions[1]"), adding its problems to p; ok is false when
// it added any.
func CompileFunction(p Problems, field string, f Function) (o Op, ok bool) {
	return compileFunc(&problems{p: p}, field, f)
}

// IDField compiles the idField s at field: a field name of the event data
// or an $.event selector naming one field. A nil Selector comes with a
// problem added to p.
func IDField(p Problems, field, s string) *Selector {
	text := s
	if len(s) < 2 || s[0] != '$' {
		text = eventRoot + "." + s
	}
	sel, err := parseSelector(text, eventRoot)
	switch {
	case err != nil:
		p.Add(field, "%v", err)
		return nil
	case sel.isRoot() || sel.filterAt >= 0 || sel.steps[len(sel.steps)-1].kind == stepKeys:
		p.Add(field, "must name one field of the event, such as customerId or $.event.customer.id")
		return nil
	}
	return &sel
}

// IndexedFields compiles a definition's indexedFields: each a selector of
// the instance ($.projection.customer.name) or a field path without the
// root (customer.name), naming fields by key and array index. The fields
// with problems, added to p, are left out.
func IndexedFields(p Problems, fields []string) []Selector {
	if len(fields) > limits.MaxIndexedFields {
		p.Add("indexedFields", "at most %d fields are allowed", limits.MaxIndexedFields)
		return nil
	}
	sels := make([]Selector, 0, len(fields))
	for i, f := range fields {
		field := fmt.Sprintf("indexedFields[%d]", i)
		text := f
		if f != "" && f[0] != '$' {
			text = projectionRoot + "." + f
		}
		sel, err := parseSelector(text, projectionRoot)
		switch {
		case err != nil:
			p.Add(field, "%v", err)
			continue
		case sel.filterAt >= 0 || (len(sel.steps) > 0 && sel.steps[len(sel.steps)-1].kind == stepKeys):
			p.Add(field, "must name one field of the instance, such as customer.name or $.projection.customer.name")
			continue
		case slices.Contains(fields[:i], f):
			p.Add(field, "%q is listed twice", clip(f))
			continue
		}
		sels = append(sels, sel)
	}
	return sels
}
