package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func uuidN(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

const todoDef = `{"projectionName":"todos","feedName":"list","handlers":[
 {"eventType":"Added","functions":[
   {"function":"append","targetSelector":"$.projection.todos","eventSelector":"$.event['id','text']"},
   {"function":"inc","targetSelector":"$.projection.open"},
   {"function":"setref","targetSelector":"$.projection.open"}]},
 {"eventType":"Done","functions":[
   {"function":"set","targetSelector":"$.projection.todos[?].done","targetFilter":"@.id == $.event.id","rawData":true},
   {"function":"dec","targetSelector":"$.projection.open"},
   {"function":"setref","targetSelector":"$.projection.open"}]}]}`

func TestProjectionLanguageOverHTTP(t *testing.T) {
	e := newEnv(t, nil)
	e.must(200, "PUT", "/projections/definitions/todos", todoDef)
	e.must(200, "PUT", "/projections/definitions/todos", todoDef) // idempotent
	n := 0
	for l := range 3 {
		for i := range l + 1 {
			n++
			e.must(200, "POST", fmt.Sprintf("/aggregates/list/l%d/events", l), events(ev(uuidN(n), "Added", fmt.Sprintf(`{"id":"t%d","text":"x"}`, i))))
		}
	}
	n++
	e.must(200, "POST", "/aggregates/list/l2/events", events(ev(uuidN(n), "Done", `{"id":"t1"}`)))

	body := readBody(t, e.must(200, "GET", "/projections/single/todos/l2", ""))
	if got := gjson.Get(body, "data.todos.1.done").Raw; got != "true" {
		t.Errorf("filtered set: %s", body)
	}
	if got := gjson.Get(body, "data.open").Str; got != "2" {
		t.Errorf("open = %q in %s", got, body)
	}
	if !gjson.Get(body, "createdAt").Exists() {
		t.Errorf("no createdAt in %s", body)
	}

	list := readBody(t, e.must(200, "GET", "/projections/single/todos?sort=-reference&limit=2", ""))
	if gjson.Get(list, "totalCount").Int() != 3 || !gjson.Get(list, "hasMore").Bool() || gjson.Get(list, "projections.#").Int() != 2 {
		t.Errorf("list: %s", list)
	}
	if ids := gjson.Get(list, "projections.#.projectionId").String(); ids != `["l2","l1"]` {
		t.Errorf("sorted ids %s", ids)
	}
	count := readBody(t, e.must(200, "GET", "/projections/single/todos/_count?reference=1", ""))
	if gjson.Get(count, "count").Int() != 1 {
		t.Errorf("count: %s", count)
	}
	over := readBody(t, e.must(200, "GET", "/projections", ""))
	if gjson.Get(over, "projections.0.projectionName").Str != "todos" || gjson.Get(over, "projections.0.projectionsCount").Int() != 3 {
		t.Errorf("overview: %s", over)
	}
	defs := readBody(t, e.must(200, "GET", "/projections/definitions?limit=1", ""))
	if gjson.Get(defs, "totalCount").Int() != 1 || gjson.Get(defs, "definitions.0.projectionName").Str != "todos" {
		t.Errorf("definitions: %s", defs)
	}
	e.must(200, "GET", "/projections/definitions/todos", "")

	e.must(200, "DELETE", "/projections/single/todos", "")
	e.must(200, "GET", "/projections/single/todos/l1", "") // rebuilt on demand
	e.must(200, "DELETE", "/projections/definitions/todos", "")
	mustErr(t, e.do("GET", "/projections/single/todos/l1", ""), 404, "not_found")
	mustErr(t, e.do("GET", "/projections/definitions/todos", ""), 404, "not_found")
}

func TestProjectionQueryParameters(t *testing.T) {
	e := newEnv(t, nil)
	e.must(200, "PUT", "/projections/definitions/todos", todoDef)
	for _, c := range []struct{ path, param string }{
		{"/projections/single/todos?limit=abc", "limit"},
		{"/projections/single/todos?limit=5000", "limit"},
		{"/projections/single/todos?skip=-1", "skip"},
		{"/projections/single/todos?sort=nope", "sort"},
		{"/projections/single/todos/x?awaitCreation=-1", "awaitCreation"},
		{"/projections/single/todos/x?awaitCreation=600000", "awaitCreation"},
		{"/projections/definitions?limit=0", "limit"},
	} {
		b := mustErr(t, e.do("GET", c.path, ""), 400, "malformed")
		if !strings.Contains(b.Message, c.param) {
			t.Errorf("%s: message %q does not name %s", c.path, b.Message, c.param)
		}
	}
	b := mustErr(t, e.do("PUT", "/projections/definitions/other", todoDef), 400, "malformed")
	if !strings.Contains(b.Message, "projectionName") {
		t.Errorf("name mismatch: %q", b.Message)
	}
}

func TestAwaitCreation(t *testing.T) {
	e := newEnv(t, nil)
	e.must(200, "PUT", "/projections/definitions/todos", todoDef)
	start := time.Now()
	mustErr(t, e.do("GET", "/projections/single/todos/l9?awaitCreation=200", ""), 404, "not_found")
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("answered 404 after %v, before awaitCreation ran out", d)
	}
	done := make(chan string)
	go func() {
		done <- readBody(t, e.do("GET", "/projections/single/todos/l9?awaitCreation=5000", ""))
	}()
	time.Sleep(50 * time.Millisecond)
	e.must(200, "POST", "/aggregates/list/l9/events", events(ev(uuidN(99), "Added", `{"id":"a","text":"x"}`)))
	select {
	case body := <-done:
		if gjson.Get(body, "projectionId").Str != "l9" {
			t.Errorf("awaited: %s", body)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("the waiting query did not see the save")
	}
}
