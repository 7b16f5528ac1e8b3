package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseKeyFile(t *testing.T) {
	in := "# projects of this server\n" +
		"\n" +
		"acme   ak_acme\tsk_acme   # the first customer\n" +
		"\t \n" +
		"  globex\tak_globex\t\tsk_globex\r\n" +
		"   # an indented comment\n" +
		"Team_2-b ak#not-a-key\n"
	// "ak#not-a-key": '#' starts a comment, so that line has 2 fields.
	if _, err := parseKeyFile(strings.NewReader(in), nil); err == nil || !strings.HasPrefix(err.Error(), "7: ") {
		t.Fatalf("a '#' inside a field starts a comment: want an error on line 7, got %v", err)
	}
	in = strings.Replace(in, "ak#not-a-key", "ak_team sk_team", 1)
	keys, err := parseKeyFile(strings.NewReader(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []projectKey{
		{name: "acme", line: 3}, {name: "globex", line: 5}, {name: "Team_2-b", line: 7},
	}
	want[0].key.AccessKey, want[0].key.SecretAccessKey = "ak_acme", "sk_acme"
	want[1].key.AccessKey, want[1].key.SecretAccessKey = "ak_globex", "sk_globex"
	want[2].key.AccessKey, want[2].key.SecretAccessKey = "ak_team", "sk_team"
	if len(keys) != len(want) {
		t.Fatalf("got %+v, want %+v", keys, want)
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Errorf("project %d: got %+v, want %+v", i, keys[i], want[i])
		}
	}
}

func TestParseKeyFileRefusals(t *testing.T) {
	long := strings.Repeat("n", 65)
	for _, c := range []struct {
		in, want string
	}{
		{"a ak sk\nb ak2\n", "2: 2 fields, no secret key"},
		{"a ak sk\n\nb ak2 # sk2\n", "3: 2 fields, no secret key"},
		{"a ak sk extra\n", "1: want 3 fields"},
		{"# one\nlonely\n", "2: want 3 fields"},
		{"a ak sk\nb ak sk2\n", "2: the access key of project b is already used on line 1"},
		{"a ak sk\n# c\na ak2 sk2\n", "3: project a is already named on line 1"},
		{"a ak sk\nA ak2 sk2\n", "2: project A is already named on line 1"},
		{"a.b ak sk\n", `1: bad project name "a.b"`},
		{"../x ak sk\n", `1: bad project name "../x"`},
		{long + " ak sk\n", "1: bad project name"},
		{"a ak s\x01k\n", "1: the secret key of project a holds a control character"},
		{"a a\x00k sk\n", "1: the access key of project a holds a control character"},
		{"# nothing\n\n", "2: the key file names no project"},
		{"", "0: the key file names no project"},
	} {
		_, err := parseKeyFile(strings.NewReader(c.in), nil)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error starting %q", c.in, err, c.want)
			continue
		}
		for _, key := range []string{"ak", "sk", "ak2", "sk2"} {
			if strings.Contains(" "+err.Error()+" ", " "+key+" ") {
				t.Errorf("%q: the error %q holds a key", c.in, err)
			}
		}
	}
	// The storage's check names the line too.
	_, err := parseKeyFile(strings.NewReader("a ak sk\n"+strings.Repeat("x", 60)+" ak2 sk2\n"), func(name string) error {
		_, _, err := projectStorage("postgres://h/db", "", name)
		return err
	})
	if err == nil || !strings.HasPrefix(err.Error(), "2: project xxx") || !strings.Contains(err.Error(), "longer than 63") {
		t.Errorf("a schema name too long: got %v", err)
	}
}

func TestProjectStorage(t *testing.T) {
	for _, c := range []struct {
		spec, schema, name, wantSpec, wantSchema string
	}{
		{"memory", "", "a", "memory", ""},
		{"sqlite:eventstore.db", "", "acme", "sqlite:eventstore.acme.db", ""},
		{"sqlite:/var/lib/es/events.sqlite3", "", "acme", "sqlite:/var/lib/es/events.acme.sqlite3", ""},
		{"sqlite:/var/lib/es.d/events", "", "acme", "sqlite:/var/lib/es.d/events.acme", ""},
		{"sqlite:data", "", "b", "sqlite:data.b", ""},
		{"sqlite:/d/.events", "", "b", "sqlite:/d/.events.b", ""},
		{"sqlite:eventstore.db", "", "", "sqlite:eventstore.db", ""},
		{"postgres://h/db", "", "acme", "postgres://h/db", "eventstore_acme"},
		{"postgres://h/db", "es", "acme", "postgres://h/db", "es_acme"},
		{"postgres://h/db", "es", "", "postgres://h/db", "es"},
	} {
		spec, schema, err := projectStorage(c.spec, c.schema, c.name)
		if err != nil || spec != c.wantSpec || schema != c.wantSchema {
			t.Errorf("projectStorage(%q, %q, %q) = %q, %q, %v; want %q, %q", c.spec, c.schema, c.name, spec, schema, err, c.wantSpec, c.wantSchema)
		}
	}
}

// TestKeyFileRefusedAtStart: the server exits non-zero with a message
// naming the file and the line.
func TestKeyFileRefusedAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("a ak sk\nb ak sk2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runMainProcess(t, "-addr", "127.0.0.1:0", "-storage", "memory", "-keys", path)
	if code == 0 || !strings.Contains(out, path+":2: the access key of project b is already used on line 1") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
	if err := os.WriteFile(path, []byte("a ak sk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"EVENTSTORE_ACCESS_KEY": "x"}
	if _, err := parseConfig([]string{"-keys", path}, func(k string) string { return env[k] }, io.Discard); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("-keys with the environment keys: %v", err)
	}
	out, code = runMainProcess(t, "-addr", "127.0.0.1:0", "-storage", "memory", "-keys", filepath.Join(t.TempDir(), "missing"))
	if code == 0 || !strings.Contains(out, "-keys") {
		t.Errorf("a missing key file: exit %d, output:\n%s", code, out)
	}
}
