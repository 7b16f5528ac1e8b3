package jsonenc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// reference is encoding/json's encoding of s with HTML escaping off.
func reference(t testing.TB, s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

var tricky = []string{
	"", "plain", `quote " and \ backslash`, "\b\f\n\r\t\x00\x01\x1f\x7f",
	"<html> & 'single'", "ü, 日本, 🎉", "\u2028 and \u2029", "bad \xff\xfe utf-8 \xc3",
	"\xed\xa0\x80 surrogate", "ends in \xe2\x82",
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range tricky {
		want := reference(t, s)
		if got := AppendString([]byte("prefix"), s); !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Errorf("AppendString(%q) = %s, want prefix%s", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := AppendString(nil, s), reference(t, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, encoding/json gives %s", s, got, want)
		}
	})
}

// TestAppendRaw checks AppendRaw against encoding/json's encoding of a
// json.RawMessage with HTML escaping off, for compact data (spaces and
// escaped quotes inside strings) and data with space between tokens, and
// that data with space that is not JSON is refused.
func TestAppendRaw(t *testing.T) {
	for _, d := range []string{`{}`, `{"a":1}`, `{"s":"a b \" c\\","n":[1,{"x":" y\u0020z "}],"<":"&"}`,
		` { "a" : [ 1 , "b c" ] } `, "{\n\t\"a\":\r\n1}", `{"q":"\\"}`, `{"q":"\\" }`} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(json.RawMessage(d)); err != nil {
			t.Fatal(err)
		}
		got, err := AppendRaw([]byte("prefix"), []byte(d))
		if err != nil || string(got) != "prefix"+strings.TrimSuffix(want.String(), "\n") {
			t.Errorf("AppendRaw(%q) = %s, %v; encoding/json gives %s", d, got, err, want.Bytes())
		}
	}
	for _, d := range []string{`{"a": }`, `{ "a"`, ` `} {
		if got, err := AppendRaw([]byte("prefix"), []byte(d)); err == nil || string(got) != "prefix" {
			t.Errorf("AppendRaw(%q) = %s, %v: want an error and dst unchanged", d, got, err)
		}
	}
}
