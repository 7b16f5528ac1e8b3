package main

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"
)

// What the data subcommands (data.go) read, write and report.

// dataLogger logs warnings and errors of the stores to stderr.
func dataLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// progress prints what a subcommand did on stderr every interval: events,
// events per second and, when the share done is known, the time left.
type progress struct {
	op     string
	w      io.Writer
	start  time.Time
	events func() int64
	// total is the events to do, when known (export); else share, when
	// set, says how much is done (import: the bytes of the file read).
	total atomic.Int64
	share func() float64
	stop  chan struct{}
	done  chan struct{}
}

func startProgress(op string, w io.Writer, every time.Duration, events func() int64) *progress {
	p := &progress{op: op, w: w, start: time.Now(), events: events, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		if every <= 0 {
			<-p.stop
			return
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.print("")
			}
		}
	}()
	return p
}

// print prints one line of progress, ending with tail.
func (p *progress) print(tail string) {
	n := p.events()
	took := time.Since(p.start)
	rate := float64(n) / max(took.Seconds(), 1e-3)
	line := fmt.Sprintf("%s: %d events in %s, %.0f events/s", p.op, n, took.Round(100*time.Millisecond), rate)
	share := 0.0
	if total := p.total.Load(); total > 0 {
		share = float64(n) / float64(total)
		line += fmt.Sprintf(", %d of %d", n, total)
	} else if p.share != nil {
		share = p.share()
	}
	if tail == "" && share > 0 && share < 1 {
		left := time.Duration(float64(took) * (1 - share) / share)
		line += fmt.Sprintf(", %.0f%%, ETA %s", 100*share, left.Round(time.Second))
	}
	fmt.Fprintln(p.w, line+tail)
}

// end stops the reports and prints the last one.
func (p *progress) end(tail string) {
	close(p.stop)
	<-p.done
	p.print(tail)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// openArchive opens the archive path ("-": stdin), gunzipping it when it
// starts as gzip does. size is the file's size, 0 when unknown; read
// counts the bytes read of it.
func openArchive(path string, stdin io.Reader) (r io.Reader, read *countingReader, size int64, close func(), err error) {
	close = func() {}
	src := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, 0, nil, err
		}
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
		src, close = f, func() { _ = f.Close() }
	}
	read = &countingReader{r: src}
	br := bufio.NewReaderSize(read, 256<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			close()
			return nil, nil, 0, nil, fmt.Errorf("%s: gzip: %w", path, err)
		}
		return zr, read, size, close, nil
	}
	return br, read, size, close, nil
}
