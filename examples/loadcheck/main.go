// Command loadcheck measures what idle and slow clients cost a running
// examples/server: the figures of findings 7 and 8 of the hardening
// issue, before and after a change, from the same command.
//
//	loadcheck -addr 127.0.0.1:8080 -pid PID -idle 5000
//	loadcheck -addr 127.0.0.1:8080 -pid PID -seed 40 -slow 20
//
// -idle N opens N connections that each make one request and then stay
// idle, and reports how many were served and refused and the server's
// resident memory and open file descriptors. -seed M saves M versions of
// one 1 MiB event to order/big; -slow N then sends N loads of it that are
// never read, and reports the server's memory after -hold. The key pair
// comes from EVENTSTORE_ACCESS_KEY and EVENTSTORE_SECRET_ACCESS_KEY. It
// only talks to the address given; run it against a local server.
package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "server address")
	pid := flag.Int("pid", 0, "server process id, to read its memory and file descriptors from /proc")
	idle := flag.Int("idle", 0, "idle keep-alive connections to open")
	seed := flag.Int("seed", 0, "1 MiB versions to save to order/big first")
	slow := flag.Int("slow", 0, "loads of order/big to send and never read")
	hold := flag.Duration("hold", 3*time.Second, "how long to wait before measuring")
	flag.Parse()
	if err := run(*addr, *pid, *idle, *seed, *slow, *hold); err != nil {
		fmt.Fprintln(os.Stderr, "loadcheck:", err)
		os.Exit(1)
	}
}

func run(addr string, pid, idle, seed, slow int, hold time.Duration) error {
	auth := "Service-Access-Key: " + os.Getenv("EVENTSTORE_ACCESS_KEY") + "\r\nService-Secret-Access-Key: " +
		os.Getenv("EVENTSTORE_SECRET_ACCESS_KEY") + "\r\n"
	for i := range seed {
		if err := save(addr, i); err != nil {
			return err
		}
	}
	fmt.Printf("before: %s\n", status(pid))
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	codes := map[int]int{}
	for range idle {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			codes[-1]++
			continue
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET /aggregates/order/none HTTP/1.1\r\nHost: x\r\n%s\r\n", auth)
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			codes[0]++
			continue
		}
		_, _ = io.Copy(io.Discard, res.Body)
		codes[res.StatusCode]++
	}
	for range slow {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /aggregates/order/big HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n%s\r\n", auth)
	}
	time.Sleep(hold)
	if idle > 0 {
		fmt.Printf("idle connections: %d opened, statuses %v (0: no answer, -1: dial failed)\n", idle, codes)
	}
	if slow > 0 {
		fmt.Printf("slow clients: %d loads of a %d MiB aggregate, not read\n", slow, seed)
	}
	fmt.Printf("after:  %s\n", status(pid))
	return nil
}

// save stores version i of order/big: one event of 1 MiB of data.
func save(addr string, i int) error {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	id[6], id[8] = id[6]&0x0f|0x40, id[8]&0x3f|0x80
	body := fmt.Sprintf(`{"events":[{"eventId":"%x-%x-%x-%x-%x","eventType":"Filled","data":{"s":"%s"}}]}`,
		id[0:4], id[4:6], id[6:8], id[8:10], id[10:], strings.Repeat("x", 1<<20))
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/aggregates/order/big/events", bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Service-Access-Key", os.Getenv("EVENTSTORE_ACCESS_KEY"))
	req.Header.Set("Service-Secret-Access-Key", os.Getenv("EVENTSTORE_SECRET_ACCESS_KEY"))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return fmt.Errorf("save %d: %s: %s", i, res.Status, b)
	}
	return nil
}

// status describes the server's resident memory and file descriptors.
func status(pid int) string {
	if pid == 0 {
		return "(no -pid)"
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return err.Error()
	}
	rss := "?"
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
	}
	fds, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return fmt.Sprintf("server RSS %s, %d open fds", rss, len(fds))
}
