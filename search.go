package eventstore

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore/internal/limits"
)

// maxIndexedWordBytes is where a longer indexed word is cut (at a
// character boundary); it exceeds any word of a search.
const maxIndexedWordBytes = 512

// compileIndexedFields compiles a definition's indexedFields: each a
// selector of the instance ($.projection.customer.name) or a field path
// without the root (customer.name), naming fields by key and array index.
func compileIndexedFields(v *validation, fields []string, aggregated bool) []selector {
	if len(fields) == 0 {
		return nil
	}
	if aggregated {
		v.add("indexedFields", "applies to single projections only")
		return nil
	}
	if len(fields) > limits.MaxIndexedFields {
		v.add("indexedFields", "at most %d fields are allowed", limits.MaxIndexedFields)
		return nil
	}
	sels := make([]selector, 0, len(fields))
	for i, f := range fields {
		field := fmt.Sprintf("indexedFields[%d]", i)
		text := f
		if f != "" && f[0] != '$' {
			text = projectionRoot + "." + f
		}
		sel, err := parseSelector(text, projectionRoot)
		switch {
		case err != nil:
			v.add(field, "%v", err)
			continue
		case sel.filterAt >= 0 || (len(sel.steps) > 0 && sel.steps[len(sel.steps)-1].kind == stepKeys):
			v.add(field, "must name one field of the instance, such as customer.name or $.projection.customer.name")
			continue
		case slices.Contains(fields[:i], f):
			v.add(field, "%q is listed twice", clip(f))
			continue
		}
		sels = append(sels, sel)
	}
	return sels
}

// isWordRune reports whether r belongs to a word: a Unicode letter, mark
// or number.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r)
}

// appendWords appends the words of s to b, lower case, each preceded by
// a space when b is not empty, and stops before a word that would make b
// longer than limit. It reports whether every word fitted.
func appendWords(b []byte, s string, limit int) ([]byte, bool) {
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

// searchText returns the indexed text of an instance: the words of the
// strings and numbers found at each indexed field, in the order of the
// fields (objects and arrays are walked, their values in order; keys,
// booleans and null are not indexed).
func searchText(root *object, fields []selector) string {
	var b []byte
	for i := range fields {
		v, ok := lookupPath(root, fields[i].steps)
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
		return appendWords(b, v, limits.MaxSearchTextBytes)
	case number:
		return appendWords(b, string(v), limits.MaxSearchTextBytes)
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

// searchWords validates the text of a search and returns its distinct
// words, normalized as indexed text is.
func searchWords(v *validation, text string) []string {
	if text == "" {
		return nil
	}
	if len(text) > limits.MaxSearchBytes {
		v.add("search", "must be at most %d bytes long", limits.MaxSearchBytes)
		return nil
	}
	if !utf8.ValidString(text) {
		v.add("search", "must be valid UTF-8")
		return nil
	}
	b, _ := appendWords(nil, text, 4*limits.MaxSearchBytes)
	if len(b) == 0 {
		v.add("search", "must contain a word (a letter or a digit)")
		return nil
	}
	var words []string
	for w := range strings.SplitSeq(string(b), " ") {
		if !slices.Contains(words, w) {
			words = append(words, w)
		}
	}
	if len(words) > limits.MaxSearchWords {
		v.add("search", "at most %d words are allowed", limits.MaxSearchWords)
		return nil
	}
	return words
}
