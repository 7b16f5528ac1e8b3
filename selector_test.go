package eventstore

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

func TestParseSelector(t *testing.T) {
	good := map[string]string{
		"$.projection.total":          "total",
		"$.projection.address.city":   "address.city",
		"$.projection.a-b_c.Ünïcode1": "a-b_c.Ünïcode1",
		"$.projection.0":              ":0",
	}
	for in, spath := range good {
		s, err := parseSelector(in, projectionRoot)
		if err != nil {
			t.Errorf("parseSelector(%q): %v", in, err)
			continue
		}
		if s.spath != spath || s.String() != in {
			t.Errorf("parseSelector(%q) = %q / %q, want %q / %q", in, s.spath, s.String(), spath, in)
		}
	}
	for _, in := range []string{"", "$", "$.projection", "$.projection.", "$.projectionx.a", "projection.a", "$.event.a",
		"$.projection.a..b", "$.projection.a b", "$.projection.a*", "$.projection.#", "$.projection.a|b", "$.projection.@this",
		"$.projection.a[0]", "$['projection']['a']", "$.projection." + strings.Repeat("a.", 40) + "a"} {
		if _, err := parseSelector(in, projectionRoot); err == nil {
			t.Errorf("parseSelector(%q) accepted a selector not of the documented form", in)
		}
	}
}

// FuzzSelector checks that an accepted selector renders back to itself, and
// that writing through it and reading it back returns the value written.
func FuzzSelector(f *testing.F) {
	for _, s := range []string{"$.projection.a", "$.projection.a.b.c", "$.projection.0", "$.projection.a-b", "$.projection.ä.ß", "$.projection.a.*", "$.projection"} {
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
		if err != nil || again.gpath != s.gpath || again.spath != s.spath {
			t.Fatalf("round trip of %q failed: %v", in, err)
		}
		out, err := sjson.SetRawBytes([]byte(`{}`), s.spath, []byte(`"v"`))
		if err != nil {
			t.Fatalf("sjson set %q: %v", s.spath, err)
		}
		if got := gjson.GetBytes(out, s.gpath); got.Raw != `"v"` {
			t.Fatalf("wrote %q through %q, read back %q from %s", "v", in, got.Raw, out)
		}
		if !gjson.ValidBytes(out) || out[0] != '{' {
			t.Fatalf("state %s is not a JSON object", out)
		}
	})
}
