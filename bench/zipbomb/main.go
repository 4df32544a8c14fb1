// Command zipbomb sends N package uploads at once to a running Sluice and
// reports the answers and the server's resident memory (VmRSS sampled
// from /proc while they run, and VmHWM, the peak, after). Each upload is
// a .tar.gz of model.yaml and an artifact of --size bytes: zeros (a
// compression bomb, ~1000:1), one pseudo-random byte in 64 (--kind
// sparse, ~27:1: under the ratio bound, so it streams to disk until the
// inflated limit) or pseudo-random bytes (--kind random, incompressible: a
// large honest upload).
//
//	go run ./bench/zipbomb --url http://127.0.0.1:18095 --pid PID --n 3 --size 400MiB
//	go run ./bench/zipbomb --url http://127.0.0.1:18095 --pid PID --n 3 --size 500MiB --kind sparse --mismatch
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

const manifest = "name: %s\nruntime: linear\nartifact: m.json\ninput: {schema: s@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\n"

func main() {
	url := flag.String("url", "http://127.0.0.1:18095", "the server")
	pid := flag.Int("pid", 0, "the server's process id (0: no memory figures)")
	n := flag.Int("n", 3, "uploads at once")
	size := flag.String("size", "400MiB", "artifact size (KiB, MiB suffixes)")
	kind := flag.String("kind", "zeros", "artifact content: zeros, sparse or random")
	mismatch := flag.Bool("mismatch", false, "post to another model's URL: the server reads the whole archive, then refuses it (400, name) without publishing or loading it, which measures the upload path alone")
	flag.Parse()
	bytesN, err := parseSize(*size)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	bodies := make([][]byte, *n)
	for i := range bodies {
		bodies[i] = archive(fmt.Sprintf("bomb-%d", i), bytesN, *kind, uint64(i))
	}
	fmt.Printf("%d uploads of %d compressed bytes each, artifact %d bytes of %s\n", *n, len(bodies[0]), bytesN, *kind)
	fmt.Printf("server RSS before: %s\n", status(*pid, "VmRSS"))

	stop := make(chan struct{})
	peak := make(chan int64)
	go func() { // sample VmRSS while the uploads run
		var max int64
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if kb := kib(status(*pid, "VmRSS")); kb > max {
				max = kb
			}
			select {
			case <-stop:
				peak <- max
				return
			case <-t.C:
			}
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			target := fmt.Sprintf("bomb-%d", i)
			if *mismatch {
				target = "elsewhere"
			}
			resp, err := http.Post(fmt.Sprintf("%s/v1/models/%s/versions", *url, target), "application/gzip", bytes.NewReader(b))
			if err != nil {
				fmt.Printf("upload %d: %v\n", i, err)
				return
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Printf("upload %d: %d %s\n", i, resp.StatusCode, strings.TrimSpace(string(msg)))
		}()
	}
	wg.Wait()
	close(stop)
	fmt.Printf("took %s\n", time.Since(start).Round(time.Millisecond))
	fmt.Printf("server RSS sampled peak: %d KiB; after: %s; VmHWM (peak since start): %s\n", <-peak, status(*pid, "VmRSS"), status(*pid, "VmHWM"))
}

func archive(name string, size int64, kind string, seed uint64) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	man := fmt.Sprintf(manifest, name)
	tw.WriteHeader(&tar.Header{Name: "model.yaml", Size: int64(len(man)), Mode: 0o644, Typeflag: tar.TypeReg})
	io.WriteString(tw, man)
	tw.WriteHeader(&tar.Header{Name: "m.json", Size: size, Mode: 0o644, Typeflag: tar.TypeReg})
	chunk := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(seed, 1))
	for left := size; left > 0; {
		c := chunk[:min(left, int64(len(chunk)))]
		switch kind {
		case "random":
			for i := range c {
				c[i] = byte(r.Uint32())
			}
		case "sparse": // one random byte in 64: about 27:1, under the ratio bound
			clear(c)
			for i := 0; i < len(c); i += 64 {
				c[i] = byte(r.Uint32())
			}
		}
		tw.Write(c)
		left -= int64(len(c))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "MiB"):
		mult, s = 1<<20, strings.TrimSuffix(s, "MiB")
	case strings.HasSuffix(s, "KiB"):
		mult, s = 1<<10, strings.TrimSuffix(s, "KiB")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("--size %q: want a positive size like 400MiB", s)
	}
	return n * mult, nil
}

// status is one field of /proc/PID/status ("123456 kB"), "" without a pid.
func status(pid int, field string) string {
	if pid == 0 {
		return ""
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func kib(s string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSuffix(s, " kB"), 10, 64)
	return n
}
