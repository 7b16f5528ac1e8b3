package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// textStorage records the SearchText and Indexed of every committed state.
type textStorage struct {
	storage.Storage
	mu      sync.Mutex
	texts   map[string]string
	indexed map[string]bool
}

func (s *textStorage) CommitProjection(ctx context.Context, c storage.ProjectionCommit) error {
	s.mu.Lock()
	for _, st := range c.States {
		s.texts[c.Name+"/"+st.InstanceID] = st.SearchText
	}
	s.indexed[c.Name] = c.Indexed
	s.mu.Unlock()
	return s.Storage.CommitProjection(ctx, c)
}

func searchDef(fields ...string) eventstore.Definition {
	return eventstore.Definition{Name: "people", Feed: "person", IndexedFields: fields,
		Handlers: []eventstore.Handler{{EventType: "Set", Functions: []eventstore.Function{
			{Name: eventstore.FuncMerge, EventSelector: "$.event"},
		}}}}
}

func newSearchStore(t *testing.T, def eventstore.Definition) (*eventstore.Store, *eventstore.Projector, *textStorage) {
	t.Helper()
	ts := &textStorage{Storage: memory.New(), texts: map[string]string{}, indexed: map[string]bool{}}
	st, err := eventstore.New(ts, nil)
	require.NoError(t, err)
	p := eventstore.NewProjector(st, nil)
	require.NoError(t, p.Create(t.Context(), def))
	return st, p, ts
}

func saveSet(t *testing.T, st *eventstore.Store, id, data string) {
	t.Helper()
	_, err := st.Save(t.Context(), "person", id, []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "Set", Data: []byte(data)}}, nil)
	require.NoError(t, err)
}

// TestSearchText: the indexed text is the words of the strings and
// numbers at the indexed fields, in field order, lower case; objects and
// arrays are walked, keys, booleans and null are not indexed; a field
// that is missing adds nothing.
func TestSearchText(t *testing.T) {
	st, p, ts := newSearchStore(t, searchDef("$.projection.name", "tags", "address", "n", "flag", "none", "list[1]"))
	for id, c := range map[string]struct{ data, want string }{
		"a": {`{"name":"Ada  LOVELACE-Byron","tags":["x1","Y_2"],"n":12.5,"flag":true,"none":null}`, "ada lovelace byron x1 y 2 12 5"},
		"b": {`{"address":{"Street":"Rue de l'Été","zip":"75001","geo":{"lat":48.8}},"list":["no","Yes"]}`, "rue de l été 75001 48 8 yes"},
		"c": {`{"other":"text"}`, ""},
		"d": {`{"name":"İstanbul ǅemal ΣΊΣΥΦΟΣ 日本語テキスト ½ ..."}`, "istanbul ǆemal σίσυφοσ 日本語テキスト ½"},
		"e": {`{"name":"a` + strings.Repeat("b", 600) + ` c"}`, "a" + strings.Repeat("b", 511) + " c"},
	} {
		saveSet(t, st, id, c.data)
		require.NoError(t, p.CatchUp(t.Context(), "people"))
		assert.Equal(t, c.want, ts.texts["people/"+id], "instance %s: %s", id, c.data)
	}
	assert.True(t, ts.indexed["people"], "a commit of a projection with indexedFields is Indexed")

	// The indexed text stops before the word that would pass MaxSearchTextBytes.
	long := strings.Repeat("word ", limits.MaxSearchTextBytes/5+10)
	saveSet(t, st, "f", fmt.Sprintf(`{"name":%q}`, long))
	require.NoError(t, p.CatchUp(t.Context(), "people"))
	got := ts.texts["people/f"]
	assert.LessOrEqual(t, len(got), limits.MaxSearchTextBytes)
	assert.Greater(t, len(got), limits.MaxSearchTextBytes-5)
	assert.True(t, strings.HasSuffix(got, " word"))
}

// TestSearchNotIndexed: a projection without indexedFields commits no
// text and is not Indexed; a search of it is refused.
func TestSearchNotIndexed(t *testing.T) {
	st, p, ts := newSearchStore(t, searchDef())
	saveSet(t, st, "a", `{"name":"Ada"}`)
	require.NoError(t, p.CatchUp(t.Context(), "people"))
	assert.Equal(t, "", ts.texts["people/a"])
	assert.False(t, ts.indexed["people"])
	_, err := p.List(t.Context(), "people", eventstore.ListOptions{Search: "ada"})
	f := validationFields(t, err)
	if assert.Len(t, f, 1) {
		assert.Equal(t, "search", f[0].Field)
		assert.Contains(t, f[0].Message, "no indexedFields")
	}
}

// TestSearchList: List's Search finds instances by the prefixes of their
// words, case-insensitively, all words required, with the other options.
func TestSearchList(t *testing.T) {
	st, p, _ := newSearchStore(t, searchDef("name", "city"))
	saveSet(t, st, "a", `{"name":"Ada Lovelace","city":"London"}`)
	saveSet(t, st, "b", `{"name":"Alan Turing","city":"London"}`)
	saveSet(t, st, "c", `{"name":"Grace Hopper","city":"New York"}`)
	find := func(opts eventstore.ListOptions, want ...string) {
		t.Helper()
		page, err := p.List(t.Context(), "people", opts)
		require.NoError(t, err)
		var got []string
		for _, pj := range page.Projections {
			got = append(got, pj.ID)
		}
		assert.Equal(t, want, got, "%+v", opts)
	}
	find(eventstore.ListOptions{Search: "LON"}, "a", "b")
	find(eventstore.ListOptions{Search: "lon, al!"}, "b")
	find(eventstore.ListOptions{Search: "new-york"}, "c")
	find(eventstore.ListOptions{Search: "ork"})
	find(eventstore.ListOptions{Search: "lon", Descending: true}, "b", "a")
	find(eventstore.ListOptions{Search: "lon", Skip: 1}, "b")
	find(eventstore.ListOptions{Search: "lon", IDs: []string{"b", "c"}}, "b")
	page, err := p.List(t.Context(), "people", eventstore.ListOptions{Search: "lon", Limit: 1})
	require.NoError(t, err)
	assert.Equal(t, int64(2), page.Total)
	assert.True(t, page.HasMore)
}

// TestSearchLimits: a search is at most MaxSearchBytes with at most
// MaxSearchWords distinct words, valid UTF-8 and holds a word.
func TestSearchLimits(t *testing.T) {
	_, p, _ := newSearchStore(t, searchDef("name"))
	ok := strings.TrimSpace(strings.Repeat("ab ", limits.MaxSearchWords)) + " ab ab"
	_, err := p.List(t.Context(), "people", eventstore.ListOptions{Search: ok})
	require.NoError(t, err, "repeated words count once")
	for search, msg := range map[string]string{
		strings.Repeat("a", limits.MaxSearchBytes+1): "must be at most 200 bytes long",
		"a b c d e f g h i j k":                      "at most 10 words are allowed",
		" -- ,":                                      "must contain a word (a letter or a digit)",
		"a\xffb":                                     "must be valid UTF-8",
	} {
		_, err := p.List(t.Context(), "people", eventstore.ListOptions{Search: search})
		f := validationFields(t, err)
		if assert.Len(t, f, 1, "%q", search) {
			assert.Equal(t, "search", f[0].Field)
			assert.Equal(t, msg, f[0].Message)
		}
		assert.True(t, errors.Is(err, eventstore.ErrInvalid))
	}
}

// TestIndexedFieldsValidation: indexedFields are selectors of the
// instance (or paths without the root), of single projections only, at
// most MaxIndexedFields, not repeated.
func TestIndexedFieldsValidation(t *testing.T) {
	_, p, _ := newSearchStore(t, searchDef("name"))
	for _, c := range []struct {
		fields     []string
		aggregated bool
		field, msg string
	}{
		{[]string{"$.event.name"}, false, "indexedFields[0]", "must start with $.projection"},
		{[]string{"items[?]"}, false, "indexedFields[0]", "must name one field of the instance"},
		{[]string{"a", "$.projection['x','y']"}, false, "indexedFields[1]", "must name one field of the instance"},
		{[]string{"a", "a"}, false, "indexedFields[1]", "listed twice"},
		{[]string{"a b"}, false, "indexedFields[0]", ""},
		{[]string{"a"}, true, "indexedFields", "applies to single projections only"},
		{make([]string, limits.MaxIndexedFields+1), false, "indexedFields", "at most 20 fields"},
	} {
		d := searchDef(c.fields...)
		d.Name = "other"
		d.Aggregated = c.aggregated
		err := p.Create(t.Context(), d)
		f := validationFields(t, err)
		if assert.NotEmpty(t, f, "%q", c.fields) {
			assert.Equal(t, c.field, f[0].Field, "%q", c.fields)
			assert.Contains(t, f[0].Message, c.msg, "%q", c.fields)
		}
	}
}

// TestIndexedFieldsChangeRebuilds: a Put that changes indexedFields is a
// replacement, rebuilt; one that repeats them is unchanged.
func TestIndexedFieldsChangeRebuilds(t *testing.T) {
	st, p, _ := newSearchStore(t, searchDef("name"))
	saveSet(t, st, "a", `{"name":"Ada","city":"London"}`)
	res, err := p.Put(t.Context(), searchDef("name"))
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutUnchanged, res)
	res, err = p.Put(t.Context(), searchDef("name", "city"))
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutReplacing, res)
	require.NoError(t, p.CatchUp(t.Context(), "people"))
	page, err := p.List(t.Context(), "people", eventstore.ListOptions{Search: "lond"})
	require.NoError(t, err)
	assert.Equal(t, int64(1), page.Total)
	d, err := p.Definition(t.Context(), "people")
	require.NoError(t, err)
	assert.Equal(t, []string{"name", "city"}, d.IndexedFields)
}
