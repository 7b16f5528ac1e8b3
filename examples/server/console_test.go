package main

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestConsoleFlag: the server serves the console at /console/ without
// keys by default, names its storage in GET /status, and with
// -console=false serves the API alone (the path is then 401 without keys,
// like any other).
func TestConsoleFlag(t *testing.T) {
	env := map[string]string{"EVENTSTORE_ACCESS_KEY": "ak", "EVENTSTORE_SECRET_ACCESS_KEY": "sk"}
	for _, c := range []struct {
		args   []string
		status int
	}{
		{nil, http.StatusOK},
		{[]string{"-console=false"}, http.StatusUnauthorized},
	} {
		base, _, stop := start(t, append([]string{"-addr", "127.0.0.1:0", "-storage", "memory", "-log-requests=false"}, c.args...), env)
		res, err := http.Get(base + "/console/")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.status {
			t.Errorf("%v: GET /console/ %d, want %d", c.args, res.StatusCode, c.status)
		}
		req, _ := http.NewRequest("GET", base+"/status", nil)
		req.Header.Set("Service-Access-Key", "ak")
		req.Header.Set("Service-Secret-Access-Key", "sk")
		res, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Storage string `json:"storage"`
			Console bool   `json:"console"`
		}
		err = json.NewDecoder(res.Body).Decode(&st)
		res.Body.Close()
		if err != nil || st.Storage != "memory" || st.Console != (c.status == http.StatusOK) {
			t.Errorf("%v: GET /status %+v %v", c.args, st, err)
		}
		if err := stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}
}
