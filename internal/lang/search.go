package lang

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore/internal/limits"
)

// maxIndexedWordBytes is where a longer indexed word is cut (at a
// character boundary); it exceeds any word of a search.
const maxIndexedWordBytes = 512

// isWordRune reports whether r belongs to a word: a Unicode letter, mark
// or number.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r)
}

// AppendWords appends the words of s to b, lower case (as SearchText
// indexes them, and a search's words are to match them), each preceded by
// a space when b is not empty, and stops before a word that would make b
// longer than limit. It reports whether every word fitted.
func AppendWords(b []byte, s string, limit int) ([]byte, bool) {
	for s != "" {
		start := strings.IndexFunc(s, isWordRune)
		if start < 0 {
			return b, true
		}
		s = s[start:]
		end := strings.IndexFunc(s, func(r rune) bool { return !isWordRune(r) })
		if end < 0 {
			end = len(s)
		}
		w := strings.ToLower(s[:end])
		s = s[end:]
		if len(w) > maxIndexedWordBytes {
			cut := maxIndexedWordBytes
			for cut > 0 && !utf8.RuneStart(w[cut]) {
				cut--
			}
			w = w[:cut]
		}
		n := len(w)
		if len(b) > 0 {
			n++
		}
		if len(b)+n > limit {
			return b, false
		}
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, w...)
	}
	return b, true
}

// SearchText returns the indexed text of the instance: the words of the
// strings and numbers found at each of fields (IndexedFields), in their
// order (objects and arrays are walked, their values in order; keys,
// booleans and null are not indexed).
func (in *Instance) SearchText(fields []Selector) string {
	var b []byte
	for i := range fields {
		v, ok := lookupPath(in.root, fields[i].steps)
		if !ok {
			continue
		}
		var fits bool
		if b, fits = appendValueWords(b, v); !fits {
			break
		}
	}
	return string(b)
}

// lookupPath returns the value at steps below root.
func lookupPath(root *object, steps []step) (any, bool) {
	var cur any = root
	for _, st := range steps {
		switch st.kind {
		case stepKey:
			o, ok := cur.(*object)
			if !ok {
				return nil, false
			}
			i := o.find(st.key)
			if i < 0 {
				return nil, false
			}
			cur = o.members[i].val
		case stepIndex:
			a, ok := cur.(*array)
			if !ok || st.index >= len(a.items) {
				return nil, false
			}
			cur = a.items[st.index]
		default:
			return nil, false
		}
	}
	return cur, true
}

// appendValueWords appends the words of v's strings and numbers to b.
func appendValueWords(b []byte, v any) ([]byte, bool) {
	fits := true
	switch v := v.(type) {
	case string:
		return AppendWords(b, v, limits.MaxSearchTextBytes)
	case number:
		return AppendWords(b, string(v), limits.MaxSearchTextBytes)
	case *object:
		for i := 0; i < len(v.members) && fits; i++ {
			b, fits = appendValueWords(b, v.members[i].val)
		}
	case *array:
		for i := 0; i < len(v.items) && fits; i++ {
			b, fits = appendValueWords(b, v.items[i])
		}
	}
	return b, fits
}
