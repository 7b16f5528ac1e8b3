package reactions_test

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for the raw deliverer's own pool
)

// BenchmarkRawDeliveriesWhileSaving is the floor under
// BenchmarkDeliveriesWhileSaving: the same client saving one event at a
// time through the Store, the same 1,000 reactions a second falling due
// and POSTed to the same receiver in a process of its own, but delivered
// by the least a program can do instead of by the Engine, with the same
// pacing (every 50 ms) and concurrency (32):
//
//   - http: no storage at all; it POSTs each reaction when due, signed as
//     the Engine signs. What the round trips and the receiver alone cost
//     the client on this machine.
//   - sql: the reactions are rows, claimed with one UPDATE per batch and
//     marked delivered with one UPDATE per batch (no leases, retries or
//     listing: less than the issue asks for), in the store's PostgreSQL
//     database (a schema of its own) or, on SQLite, in a file of its own,
//     so that these writes never wait for the store's writer, which the
//     Engine's must.
//
// It reports what BenchmarkDeliveriesWhileSaving does, under the same
// names; run both in one process to compare them:
//
//	go test ./reactions -run X -bench DeliveriesWhileSaving -benchtime 10x
func BenchmarkRawDeliveriesWhileSaving(b *testing.B) {
	for name, open := range backends(b) {
		if name == "memory" {
			continue // the client is CPU-bound there: any other work shows
		}
		for _, c := range []string{"http", "sql"} {
			b.Run(name+"/"+c, func(b *testing.B) {
				var db *sql.DB
				if c == "sql" {
					db = rawDB(b, name)
				}
				var (
					mu    sync.Mutex
					times []time.Time
				)
				target, collect := startReceiver(b, func(at time.Time, _ int64) {
					mu.Lock()
					times = append(times, at)
					mu.Unlock()
				})
				st, _ := eventstore.New(open(), nil)
				defer st.Close()
				d := &rawDeliverer{target: target, db: db, pg: name == "postgres",
					client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
				if err := d.init(b.Context()); err != nil {
					b.Fatal(err)
				}
				saved := 0
				saveFor := func(w time.Duration) float64 {
					n, start := 0, time.Now()
					for time.Since(start) < w {
						if _, err := st.Save(b.Context(), "customer", fmt.Sprint("s-", saved), []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "other"}}, nil); err != nil {
							b.Fatal(err)
						}
						n, saved = n+1, saved+1
					}
					return float64(n) / time.Since(start).Seconds()
				}
				const window = 500 * time.Millisecond
				const perWindow = int(window / time.Millisecond)
				var cpuWith, cpuAlone time.Duration
				alone := func() float64 {
					c0 := cpuTime()
					r := saveFor(window)
					cpuAlone = cpuTime() - c0
					return r
				}
				with := func() (rate, delivered float64) {
					first := time.Now().Add(200 * time.Millisecond)
					if err := d.schedule(b.Context(), first, perWindow); err != nil {
						b.Fatal(err)
					}
					collect()
					mu.Lock()
					times = times[:0]
					mu.Unlock()
					ctx, stop := context.WithCancel(b.Context())
					done := make(chan struct{})
					go func() { d.run(ctx); close(done) }()
					time.Sleep(time.Until(first))
					c0 := cpuTime()
					rate = saveFor(window)
					end := time.Now()
					cpuWith = cpuTime() - c0
					n := 0
					for n < perWindow && time.Since(end) < 10*time.Second {
						time.Sleep(time.Millisecond)
						collect()
						mu.Lock()
						n = len(times)
						mu.Unlock()
					}
					stop()
					<-done
					mu.Lock()
					last := first
					for _, t := range times {
						last = later(last, t)
					}
					mu.Unlock()
					return rate, float64(n) / last.Sub(first).Seconds()
				}
				var cpu []float64
				a, m, ratio, rates := alternate(b, alone, with, func(_, _, delivered float64) {
					cpu = append(cpu, float64(cpuWith-cpuAlone)/float64(time.Microsecond)/(delivered*window.Seconds()))
				})
				b.ReportMetric(median(a), "saves/s-alone")
				b.ReportMetric(median(m), "saves/s-meanwhile")
				b.ReportMetric(median(ratio), "%saverate")
				b.ReportMetric(median(rates), "deliveries/s")
				b.ReportMetric(median(cpu), "µs-cpu/delivery")
			})
		}
	}
}

// alternate runs b's iterations as pairs of windows in alternating order,
// the client alone and with deliveries, and returns per pair the client's
// rates alone and meanwhile, their ratio in percent and the deliveries a
// second; after, when not nil, sees each pair's figures as it ends.
func alternate(b *testing.B, alone func() float64, with func() (rate, delivered float64),
	after func(alone, meanwhile, delivered float64)) (a, m, ratio, rates []float64) {
	for i := 0; b.Loop(); i++ {
		var x, y, r float64
		if i%2 == 0 {
			x = alone()
			y, r = with()
		} else {
			y, r = with()
			x = alone()
		}
		a, m, ratio, rates = append(a, x), append(m, y), append(ratio, y/x*100), append(rates, r)
		if after != nil {
			after(x, y, r)
		}
	}
	return a, m, ratio, rates
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// rawDB opens the raw deliverer's database: a fresh schema of the test
// PostgreSQL database, or a SQLite file of its own in WAL mode with
// synchronous=FULL and one connection, as the store's writer has.
func rawDB(b *testing.B, backend string) *sql.DB {
	if backend == "sqlite" {
		db, err := sql.Open("sqlite", sqlite.DSN(filepath.Join(b.TempDir(), "raw.db"), 5*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		b.Cleanup(func() { _ = db.Close() })
		return db
	}
	url := cmp.Or(os.Getenv("EVENTSTORE_POSTGRES_URL"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	schema := fmt.Sprintf("es_raw_%d", time.Now().UnixNano())
	admin, err := sql.Open("pgx", url)
	if err == nil {
		_, err = admin.Exec("CREATE SCHEMA " + schema)
		_ = admin.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
	// Every connection of the pool works in the schema.
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	db, err := sql.Open("pgx", url+sep+"search_path="+schema)
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(4)
	b.Cleanup(func() {
		_, _ = db.Exec("DROP SCHEMA " + schema + " CASCADE")
		_ = db.Close()
	})
	return db
}

// rawDeliverer delivers BenchmarkRawDeliveriesWhileSaving's reactions:
// every 50 ms it takes those due (from memory, or claimed with one UPDATE),
// POSTs each, 32 at once, and, with a database, marks the delivered ones
// with one UPDATE every 50 ms.
type rawDeliverer struct {
	client *http.Client
	target string
	db     *sql.DB // nil: no storage
	pg     bool    // db is PostgreSQL

	mu   sync.Mutex
	next int      // the id of the next reaction scheduled
	due  []rawDue // without db: the reactions not yet taken, earliest first
	body func(id int64) []byte
}

type rawDue struct {
	id  int64
	at  time.Time
	msg []byte
}

func (d *rawDeliverer) init(ctx context.Context) error {
	d.body = func(id int64) []byte {
		return fmt.Appendf(nil, `{"metadata":{"aggregateId":"o-%d","aggregateType":"order","timestamp":%d,"sequenceNumber":1,"reactionId":"%036d"},"event":{"eventId":"%036d","eventType":"placed","data":{"total":12}}}`,
			id, time.Now().UnixMilli(), id, id)
	}
	if d.db == nil {
		return nil
	}
	payload := "BLOB"
	if d.pg {
		payload = "bytea"
	}
	_, err := d.db.ExecContext(ctx, `CREATE TABLE raw_reactions (id BIGINT PRIMARY KEY, due_at BIGINT NOT NULL,
		state INT NOT NULL, payload `+payload+` NOT NULL)`)
	if err == nil {
		_, err = d.db.ExecContext(ctx, `CREATE INDEX raw_due ON raw_reactions (due_at) WHERE state = 0`)
	}
	return err
}

// schedule adds n reactions due one a millisecond from first.
func (d *rawDeliverer) schedule(ctx context.Context, first time.Time, n int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ins strings.Builder
	var args []any
	for i := range n {
		id, at := int64(d.next), first.Add(time.Duration(i)*time.Millisecond)
		d.next++
		if d.db == nil {
			d.due = append(d.due, rawDue{id, at, d.body(id)})
			continue
		}
		if ins.Len() > 0 {
			ins.WriteString(", ")
		}
		if d.pg {
			fmt.Fprintf(&ins, "($%d, $%d, 0, $%d)", len(args)+1, len(args)+2, len(args)+3)
		} else {
			ins.WriteString("(?, ?, 0, ?)")
		}
		args = append(args, id, at.UnixMicro(), d.body(id))
	}
	if d.db == nil {
		return nil
	}
	_, err := d.db.ExecContext(ctx, "INSERT INTO raw_reactions (id, due_at, state, payload) VALUES "+ins.String(), args...)
	return err
}

// take returns the reactions due now, at most 64.
func (d *rawDeliverer) take(ctx context.Context) ([]rawDue, error) {
	if d.db == nil {
		d.mu.Lock()
		defer d.mu.Unlock()
		n := 0
		for n < len(d.due) && n < 64 && !d.due[n].at.After(time.Now()) {
			n++
		}
		out := slices.Clone(d.due[:n])
		d.due = d.due[n:]
		return out, nil
	}
	q := `UPDATE raw_reactions SET state = 1 WHERE id IN (SELECT id FROM raw_reactions WHERE state = 0 AND due_at <= ?
		ORDER BY due_at LIMIT 64) RETURNING id, payload`
	if d.pg {
		q = `UPDATE raw_reactions SET state = 1 WHERE id IN (SELECT id FROM raw_reactions WHERE state = 0 AND due_at <= $1
			ORDER BY due_at LIMIT 64 FOR UPDATE SKIP LOCKED) RETURNING id, payload`
	}
	rows, err := d.db.QueryContext(ctx, q, time.Now().UnixMicro())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []rawDue
	for rows.Next() {
		var r rawDue
		if err := rows.Scan(&r.id, &r.msg); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// done marks ids delivered.
func (d *rawDeliverer) done(ctx context.Context, ids []int64) error {
	if d.db == nil || len(ids) == 0 {
		return nil
	}
	list, _ := json.Marshal(ids)
	q := `UPDATE raw_reactions SET state = 2 WHERE id IN (SELECT value FROM json_each(?))`
	if d.pg {
		q = `UPDATE raw_reactions SET state = 2 WHERE id = ANY($1::bigint[])`
		_, err := d.db.ExecContext(ctx, q, ids)
		return err
	}
	_, err := d.db.ExecContext(ctx, q, string(list))
	return err
}

// run delivers until ctx is done.
func (d *rawDeliverer) run(ctx context.Context) {
	jobs := make(chan rawDue, 64)
	delivered := make(chan int64, 64)
	var workers sync.WaitGroup
	for range 32 {
		workers.Go(func() {
			for j := range jobs {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.target, bytes.NewReader(j.msg))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(reactions.HeaderSignature, reactions.Sign("r", j.msg))
				req.Header.Set(reactions.HeaderReactionID, fmt.Sprint(j.id))
				if resp, err := d.client.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					delivered <- j.id
				}
			}
		})
	}
	recorded := make(chan struct{})
	go func() {
		defer close(recorded)
		var ids []int64
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case id, ok := <-delivered:
				if !ok {
					_ = d.done(context.Background(), ids)
					return
				}
				ids = append(ids, id)
			case <-t.C:
				_ = d.done(context.Background(), ids)
				ids = ids[:0]
			}
		}
	}()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for ctx.Err() == nil {
		due, _ := d.take(ctx)
		for _, r := range due {
			jobs <- r
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	close(jobs)
	workers.Wait()
	close(delivered)
	<-recorded
}
