package exp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/sqlite"
)

const def = `{"projectionName":"n","feedName":"order","aggregated":true,"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.count"}]}]}`

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	n := env("N", 1000)
	proj := env("PROJ", 1)
	dir := b.TempDir()
	stores := make([]*eventstore.Store, n)
	for i := range stores {
		stg, err := sqlite.Open(filepath.Join(dir, fmt.Sprintf("t%d.db", i)), &sqlite.Options{CheckpointPages: env("CKPT", 0), CacheKiB: env("CACHE", 0), ReadConns: env("RC", 0)})
		if err != nil {
			b.Fatal(err)
		}
		st, err := eventstore.New(stg, nil)
		if err != nil {
			b.Fatal(err)
		}
		stores[i] = st
		if proj == 1 {
			p := eventstore.NewProjector(st, nil)
			d, _ := eventstore.DecodeDefinition([]byte(def))
			if _, err := p.Put(ctx, d); err != nil {
				b.Fatal(err)
			}
			pctx, cancel := context.WithCancel(ctx)
			go p.Run(pctx)
			b.Cleanup(cancel)
		}
		b.Cleanup(func() { st.Close() })
	}
	k := 0
	save := func(st *eventstore.Store) {
		k++
		id := fmt.Sprintf("%08x-0000-4000-8000-000000000000", k)
		if _, err := st.Save(ctx, "order", fmt.Sprintf("o-%d", k%100), []eventstore.NewEvent{{ID: id, Type: "Placed", Data: []byte(`{"x":1}`)}}, nil); err != nil {
			b.Fatal(err)
		}
	}
	for w := 0; w < env("WARM", 1); w++ {
		for _, st := range stores {
			save(st)
		}
	}
	if env("IDLE", 0) == 1 {
		c0 := cpu()
		time.Sleep(2 * time.Second)
		b.Logf("idle cpu %%: %.1f", 100*(cpu()-c0).Seconds()/2)
	}
	phase := os.Getenv("PHASE")
	if f := os.Getenv("PROF"); f != "" {
		fh, _ := os.Create(f)
		pprof.StartCPUProfile(fh)
		defer pprof.StopCPUProfile()
	}
	round := env("ROUND", n)
	b.ResetTimer()
	var single, rr, cs, cr time.Duration
	j := 0
	for done := 0; done < b.N; done += round {
		r := min(round, b.N-done)
		t0, c0 := time.Now(), cpu()
		if phase != "rr" {
			for i := 0; i < r; i++ {
				save(stores[0])
			}
		}
		t1, c1 := time.Now(), cpu()
		if phase != "single" {
			for i := 0; i < r; i++ {
				save(stores[j%n])
				j++
			}
		}
		single, rr = single+t1.Sub(t0), rr+time.Since(t1)
		cs, cr = cs+c1-c0, cr+cpu()-c1
	}
	b.ReportMetric(float64(b.N)/single.Seconds(), "single/s")
	b.ReportMetric(float64(b.N)/rr.Seconds(), "rr/s")
	b.ReportMetric(100*single.Seconds()/rr.Seconds(), "%")
	b.ReportMetric(float64(cs.Microseconds())/float64(b.N), "cpuus/single")
	b.ReportMetric(float64(cr.Microseconds())/float64(b.N), "cpuus/rr")
}
