package main

import (
	"io"
	"strings"
	"testing"
)

func TestListenURLFlagChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-storage", "memory", "-postgres-listen-url", "postgres://u@h/db"}, "needs a postgres:// -storage"},
		{[]string{"-storage", "postgres://u@h/db", "-postgres-listen-url", "sqlite:x.db"}, `must be a "postgres://..." URL`},
		{[]string{"-storage", "postgres://u@h/db", "-postgres-listen-url", "postgres://u:secret@h:notaport/db"}, "does not parse"},
	} {
		_, err := parseConfig(c.args, func(string) string { return "" }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%v: the error quotes the URL's password: %v", c.args, err)
		}
	}
	c, err := parseConfig([]string{"-storage", "postgres://u@h/db", "-postgres-listen-url", "postgres://u@h2/db"}, func(string) string { return "" }, io.Discard)
	if err != nil || c.listen.url != "postgres://u@h2/db" {
		t.Errorf("parseConfig: %v, listen url %q", err, c.listen.url)
	}
}

// TestListenURLTenants: with -postgres-listen-url the tenants' shared
// Listener connects there (here: the same server, directly), and a
// tenant's saves and feed reads work.
func TestListenURLTenants(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL")
	}
	_, url, schema := postgresAdmin(t, "es_listenurl_")
	base, _, stop := start(t, []string{"-addr", "127.0.0.1:0", "-storage", url, "-postgres-schema", schema,
		"-postgres-listen-url", url, "-log-requests=false"}, tenantEnv)
	defer func() { _ = stop() }()
	if code, body := tcall(t, "POST", base+"/tenants", "", `{"tenantId":"`+tenantB+`"}`, false); code != 200 {
		t.Fatalf("add tenant: %d %s", code, body)
	}
	if code, body := tcall(t, "POST", base+"/aggregates/order/o-2/events", tenantB, saveO2, false); code != 200 {
		t.Fatalf("tenant save: %d %s", code, body)
	}
	if code, body := tcall(t, "GET", base+"/feeds/order", tenantB, "", false); code != 200 || !strings.Contains(body, "9d0f7780-8536-41ef-955c-f18a02a01bf8") {
		t.Errorf("tenant feed: %d %s", code, body)
	}
}
