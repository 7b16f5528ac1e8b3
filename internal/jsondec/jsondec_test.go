package jsondec

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"
)

type flat struct {
	SKU    string  `json:"sku"`
	Total  float64 `json:"total"`
	Count  int     `json:"count"`
	Small  int8    `json:"small,omitempty"`
	U      uint16  `json:"u"`
	F32    float32 `json:"f32"`
	OK     bool    `json:"ok"`
	Plain  string
	hidden string
	Skip   string `json:"-"`
	Dash   string `json:"-,"`
}

type mixed struct {
	ID    string            `json:"id"`
	Items []int             `json:"items"`
	Tags  map[string]string `json:"tags"`
	At    time.Time         `json:"at"`
	Ptr   *flat             `json:"ptr"`
	Any   any               `json:"any"`
	Raw   json.RawMessage   `json:"raw"`
	N     json.Number       `json:"n"`
	Bytes []byte            `json:"bytes"`
}

type cents int64

type named struct {
	Amount cents `json:"amount"`
	Name   myStr `json:"name"`
}

type myStr string

// inputs are tried on every type: good, bad and odd JSON.
var inputs = []string{
	`{}`, ` { } `, `{"sku":"A-1","total":12.5,"count":3}`, `{"total": 12.5, "sku": "A-1"}`,
	`{"sku":"a","sku":"b"}`, `{"SKU":"upper"}`, `{"Sku":"x","sku":"y"}`, `{"plain":"p"}`, `{"Plain":"P"}`,
	`{"hidden":"h"}`, `{"Skip":"s","-":"dash"}`, `{"unknown":{"a":[1,2,{"b":null}]},"sku":"z"}`,
	`{"sku":"\u00e9t\u00e9"}`, `{"sku":"été"}`, `{"sku":"a\nb"}`, "{\"sku\":\"a\x01\"}", "{\"sku\":\"\xff\"}",
	`{"sku":null,"total":null,"count":null,"ok":null}`, `{"sku":1}`, `{"total":"1"}`, `{"count":1.5}`,
	`{"count":1e2}`, `{"count":-0}`, `{"count":9223372036854775807}`, `{"count":9223372036854775808}`,
	`{"small":127}`, `{"small":128}`, `{"u":-1}`, `{"u":65535}`, `{"u":65536}`, `{"f32":3.4e38}`,
	`{"f32":3.5e38}`, `{"total":1e400}`, `{"total":-1.5e-3}`, `{"total":01}`, `{"total":1.}`,
	`{"total":.5}`, `{"total":+1}`, `{"total":-}`, `{"total":1e}`, `{"ok":true}`, `{"ok":false}`,
	`{"ok":tru}`, `{"ok":1}`, `{"sku":"a",}`, `{,}`, `{"sku" "a"}`, `{"sku":"a"} x`, `{"sku":"a"}}`,
	`[1]`, `null`, `"s"`, ``, ` `, `{`, `{"sku":"a"`, `{"a":[}`, `{"a":"\x"}`, `{"a":"\u12"}`,
	`{"a":"\u12g4"}`, `{"\u0073ku":"escaped key"}`, `{"ſku":"long s"}`, `{"id":"i","items":[1,2,3],"tags":{"k":"v"}}`,
	`{"items":null,"tags":null,"ptr":null,"any":null}`, `{"items":"no"}`, `{"at":"2026-12-02T01:00:00Z"}`,
	`{"at":"not a time"}`, `{"ptr":{"sku":"in","count":2}}`, `{"any":{"x":[1,"2",true]}}`, `{"raw":{"a" : 1}}`,
	`{"n":12.50}`, `{"n":"x"}`, `{"bytes":"aGk="}`, `{"bytes":"!"}`, `{"amount":12,"name":"n"}`,
	`{"amount":1.5}`, `{"items":[1,2],"items":[3]}`, `{"tags":{"a":"1"},"tags":{"b":"2"}}`,
	`{"a":` + strings.Repeat("[", 150) + strings.Repeat("]", 150) + `}`, `{"a":[1,2,]}`, `{"a":{"b"}}`,
	"\t{\n\"sku\"\r:\"w\"\n}\n", `{"sku":"a"}` + "\x00",
}

// check decodes in with d and with encoding/json, from zero values, and
// reports any difference in value or in error.
func check[T any](t *testing.T, d *Decoder[T], in string) {
	t.Helper()
	var got, want T
	gerr := d.Unmarshal([]byte(in), &got)
	werr := json.Unmarshal([]byte(in), &want)
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Errorf("%T %q: error %v, encoding/json %v", got, in, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%T %q: %+v, encoding/json %+v", got, in, got, want)
	}
}

func TestSameAsEncodingJSON(t *testing.T) {
	fd, md, nd := For[flat](), For[mixed](), For[named]()
	if fd == nil || md == nil || nd == nil {
		t.Fatal("For must serve flat, mixed and named structs")
	}
	for _, in := range inputs {
		check(t, fd, in)
		check(t, md, in)
		check(t, nd, in)
	}
}

func TestForRefuses(t *testing.T) {
	type embedded struct{ flat }
	type withString struct {
		N int `json:"n,string"`
	}
	type odd struct {
		N int `json:"n!"`
	}
	if For[embedded]() != nil || For[withString]() != nil || For[odd]() != nil ||
		For[time.Time]() != nil || For[map[string]any]() != nil || For[int]() != nil {
		t.Error("For must refuse what it cannot map as encoding/json does")
	}
}

func TestDecodesItselfWithoutAllocatingMore(t *testing.T) {
	d := For[flat]()
	data := []byte(`{"total": 12.5, "sku": "A-1", "count": 2, "other": [1, {"x": "y"}]}`)
	var v flat
	if err := d.Unmarshal(data, &v); err != nil || v.SKU != "A-1" || v.Total != 12.5 || v.Count != 2 {
		t.Fatalf("%+v %v", v, err)
	}
	v = flat{}
	if !d.decode(data, unsafe.Pointer(&v)) {
		t.Fatal("a flat object with an unknown nested value is decoded without encoding/json")
	}
	allocs := testing.AllocsPerRun(100, func() {
		v = flat{}
		_ = d.Unmarshal(data, &v)
	})
	if allocs > 1 {
		t.Errorf("%v allocations per decode, want 1 (the string)", allocs)
	}
}

func FuzzSameAsEncodingJSON(f *testing.F) {
	for _, in := range inputs {
		f.Add(in)
	}
	fd, md := For[flat](), For[mixed]()
	f.Fuzz(func(t *testing.T, in string) {
		check(t, fd, in)
		check(t, md, in)
	})
}
