package web

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// serveTest serves s on a loopback port and returns its address.
func serveTest(t *testing.T, s *Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String()
}

// trickle writes head at once, then tail one byte every gap until the
// server closes the connection or stop is closed, and returns how long
// the connection lived and what the server answered.
func trickle(t *testing.T, addr, head, tail string, gap time.Duration, stop <-chan struct{}) (time.Duration, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, head); err != nil {
		t.Error(err)
		return 0, ""
	}
	answer := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(c) // until the server closes
		answer <- string(b)
	}()
	for i := 0; ; i = (i + 1) % len(tail) {
		select {
		case a := <-answer:
			return time.Since(start), a
		case <-stop:
			return time.Since(start), ""
		case <-time.After(gap):
		}
		if _, err := c.Write([]byte{tail[i]}); err != nil {
			return time.Since(start), <-answer
		}
	}
}

const loginBody = `{"username":"admin","password":"wrong password, slowly"}`

func loginHead(contentLength int) string {
	return "POST /api/v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", contentLength)
}

// TestSlowClientsAreCut: a client that sends its headers, or the body of
// POST /api/v1/auth/login, a byte at a time is cut within the server's
// timeout instead of holding the connection as long as it keeps sending.
func TestSlowClientsAreCut(t *testing.T) {
	const timeout = 400 * time.Millisecond
	s := newTestServer(t, &fakeBroker{}, func(o *Options) { o.ReadHeaderTimeout, o.ReadTimeout = timeout, 2*timeout })
	addr := serveTest(t, s)
	tests := []struct {
		name, head, tail string
		within           time.Duration
		answer           string // what the server says before closing, if anything
	}{
		{"slow header", "POST /api/v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\n", "X-Slow: aaaaaaaaaaaaaaaaaaaa\r\n", timeout, ""},
		{"slow body", loginHead(len(loginBody)), loginBody, 2 * timeout, "408 Request Timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stop := make(chan struct{})
			time.AfterFunc(10*time.Second, func() { close(stop) })
			lived, answer := trickle(t, addr, tt.head, tt.tail, 50*time.Millisecond, stop)
			if lived > tt.within+time.Second {
				t.Errorf("connection lived %v, want it cut within %v", lived, tt.within)
			}
			if !strings.Contains(answer, tt.answer) {
				t.Errorf("answer %q, want %q", answer, tt.answer)
			}
		})
	}
}

// TestSlowClientsDoNotBlockOthers: while many clients trickle login
// bodies, a normal login and a normal API request are answered at once.
func TestSlowClientsDoNotBlockOthers(t *testing.T) {
	s := newTestServer(t, &fakeBroker{}, func(o *Options) { o.ReadTimeout = 5 * time.Second })
	addr := serveTest(t, s)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { trickle(t, addr, loginHead(len(loginBody)), loginBody, 100*time.Millisecond, stop) })
	}
	t.Cleanup(func() { close(stop); wg.Wait() })
	time.Sleep(200 * time.Millisecond) // let them connect and start trickling
	client := &http.Client{Timeout: 2 * time.Second}
	start := time.Now()
	res, err := client.Post("http://"+addr+"/api/v1/auth/login", "application/json",
		strings.NewReader(`{"username":"admin","password":"`+testPassword+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("login: %d", res.StatusCode)
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/v1/overview", nil)
	req.SetBasicAuth("admin", testPassword)
	if res, err = client.Do(req); err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("overview: %d", res.StatusCode)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("two requests took %v beside 50 slow clients", d)
	}
}

// TestRequestLimits: bodies and headers beyond their limits are refused
// without being read to the end.
func TestRequestLimits(t *testing.T) {
	s := newTestServer(t, &fakeBroker{}, func(o *Options) { o.MaxHeaderBytes = 4 << 10 })
	addr := serveTest(t, s)
	big := `{"username":"admin","password":"` + strings.Repeat("x", maxLoginBody) + `"}`
	res, err := http.Post("http://"+addr+"/api/v1/auth/login", "application/json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("login with a %d-byte body: %d, want 413", len(big), res.StatusCode)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("y", 16<<10))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, "431") {
		t.Errorf("16 KiB header against a 4 KiB limit: %q %v, want 431", line, err)
	}
}
