package exp

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage/sqlite"
	_ "modernc.org/sqlite"
)

func env(k string, d int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return d
}

func BenchmarkRaw(b *testing.B) {
	n := env("N", 1000)
	dir := b.TempDir()
	extra := os.Getenv("EXTRA")
	dbs := make([]*sql.DB, n)
	for i := range dbs {
		db, err := sql.Open("sqlite", sqlite.DSN(filepath.Join(dir, fmt.Sprintf("t%d.db", i)), 5*time.Second)+extra)
		if err != nil {
			b.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		if _, err := db.Exec(`create table if not exists e(id integer primary key, a text, b blob)`); err != nil {
			b.Fatal(err)
		}
		if _, err := db.Exec(`insert into e(a,b) values('x', randomblob(200))`); err != nil {
			b.Fatal(err)
		}
		for w := 0; w < env("WARM", 0); w++ {
			if _, err := db.Exec(`insert into e(a,b) values('x', randomblob(4000))`); err != nil {
				b.Fatal(err)
			}
		}
		dbs[i] = db
		b.Cleanup(func() { db.Close() })
	}
	b.ResetTimer()
	var single, rr time.Duration
	for done := 0; done < b.N; done += n {
		round := min(n, b.N-done)
		t0 := time.Now()
		for i := 0; i < round; i++ {
			if _, err := dbs[0].Exec(`insert into e(a,b) values('x', randomblob(200))`); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		for i := 0; i < round; i++ {
			if _, err := dbs[i].Exec(`insert into e(a,b) values('x', randomblob(200))`); err != nil {
				b.Fatal(err)
			}
		}
		single, rr = single+t1.Sub(t0), rr+time.Since(t1)
	}
	b.ReportMetric(float64(b.N)/single.Seconds(), "single/s")
	b.ReportMetric(float64(b.N)/rr.Seconds(), "rr/s")
	b.ReportMetric(100*single.Seconds()/rr.Seconds(), "%")
}
