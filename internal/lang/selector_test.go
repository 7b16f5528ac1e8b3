package lang

import (
	"strings"
	"testing"
)

func TestParseSelector(t *testing.T) {
	good := map[string]int{
		"$.projection":                   0,
		"$.projection.total":             1,
		"$.projection.address.city":      2,
		"$.projection.a-b_c.Ünïcode1":    2,
		"$.projection.0":                 1,
		"$.projection.items[0]":          2,
		"$.projection['a b'].c":          2,
		"$.projection.todos[?].status":   3,
		"$.projection.todos[?]":          2,
		"$.projection['x.y']":            1,
		"$.projection[\"q\"]":            1,
		"$.projection.m['a','b']":        2,
		"$.projection.a[1][2]":           3,
		"$.projection.list[?].tags[0].n": 5,
	}
	for in, steps := range good {
		s, err := parseSelector(in, projectionRoot)
		if err != nil {
			t.Errorf("parseSelector(%q): %v", in, err)
			continue
		}
		if len(s.steps) != steps || s.String() != in {
			t.Errorf("parseSelector(%q) has %d steps / %q, want %d", in, len(s.steps), s.String(), steps)
		}
	}
	for _, in := range []string{"", "$", "$.projection.", "$.projectionx.a", "projection.a", "$.event.a",
		"$.projection.a..b", "$.projection.a b", "$.projection.a*", "$.projection.#", "$.projection.a|b", "$.projection.@this",
		"$.projection[?][?]", "$.projection['a','b'].c", "$.projection['']", "$.projection['a", "$.projection[01x]",
		"$.projection[99999999999]", "$.projection." + strings.Repeat("a.", 40) + "a"} {
		if _, err := parseSelector(in, projectionRoot); err == nil {
			t.Errorf("parseSelector(%q) accepted a selector not of the documented form", in)
		}
	}
}

func TestGJSONPathEscapes(t *testing.T) {
	s, err := parseSelector("$.event['a.b*c'].d", eventRoot)
	if err != nil {
		t.Fatal(err)
	}
	if s.gpath != `a\.b\*c.d` {
		t.Errorf("gpath = %q", s.gpath)
	}
}

// FuzzSelector checks that an accepted selector renders back to itself,
// compiles again to the same steps, and that its gjson path never holds
// an unescaped character gjson treats specially.
func FuzzSelector(f *testing.F) {
	for _, s := range []string{"$.projection.a", "$.projection.a.b.c", "$.projection.0", "$.projection.a-b", "$.projection.ä.ß",
		"$.projection.a.*", "$.projection", "$.projection.x[?].y", "$.projection['a|b'][3]", "$.projection['a','b']"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := parseSelector(in, projectionRoot)
		if err != nil {
			return
		}
		if s.String() != in {
			t.Fatalf("render %q != input %q", s.String(), in)
		}
		again, err := parseSelector(s.String(), projectionRoot)
		if err != nil || again.gpath != s.gpath || len(again.steps) != len(s.steps) {
			t.Fatalf("round trip of %q failed: %v", in, err)
		}
		for i := 0; i < len(s.gpath); i++ {
			c := s.gpath[i]
			if c == '\\' {
				i++
				continue
			}
			if strings.IndexByte("*?|#@!=<>%'\"[](){}", c) >= 0 {
				t.Fatalf("gjson path %q of %q holds an unescaped %q", s.gpath, in, c)
			}
		}
	})
}
